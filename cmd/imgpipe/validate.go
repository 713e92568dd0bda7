package main

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/imgpipe/imgpipe/pipeline"
	"github.com/imgpipe/imgpipe/pipeline/folderrun"
	"github.com/imgpipe/imgpipe/pipeline/job"
)

// maxStdinSpec bounds what validate -p - reads: past ParseSpec's own limit, so that a longer
// spec gets ParseSpec's error rather than a cut one.
const maxStdinSpec = 1 << 20

func newValidateCmd(stdout, stderr io.Writer) *cobra.Command {
	var spec string
	cmd := withHelp("validate", &cobra.Command{
		Use:   "validate JOB.yaml... | validate - | validate -p SPEC|-",
		Short: "Check job files or a pipeline spec without running them",
		RunE: func(cmd *cobra.Command, args []string) error {
			if cmd.Flags().Changed("pipeline") {
				if len(args) > 0 {
					return usageError("validate: give job files or -p, not both")
				}
				if spec == folderrun.StdinInput {
					b, err := io.ReadAll(io.LimitReader(cmd.InOrStdin(), maxStdinSpec+1))
					if err != nil {
						return fmt.Errorf("validate -p -: reading stdin: %w", err)
					}
					spec = strings.TrimRight(string(b), "\r\n") // echo's newline ends the spec, not a stage
				}
				return validateSpec(spec, stdout, stderr)
			}
			if len(args) == 0 {
				return usageError("validate: name job files, - for stdin, or -p SPEC")
			}
			var errs []error
			for _, path := range args {
				j, err := validateJob(path, cmd.InOrStdin())
				if err != nil {
					errs = append(errs, pipeline.Errors(err)...)
					continue
				}
				fmt.Fprintf(stdout, "%s: ok: %s\n", path, pipeline.FormatSpec(j.Steps))
			}
			if len(errs) > 0 {
				return &exitError{code: exitUsage, err: pipeline.ErrorList(errs)}
			}
			return nil
		},
	})
	cmd.Flags().StringVarP(&spec, "pipeline", "p", "", "check this pipeline spec instead of job files (- reads it from stdin)")
	return cmd
}

// validateSpec checks a spec as `run -p` does: every error, each under a caret at its column.
func validateSpec(spec string, stdout, stderr io.Writer) error {
	plan, err := pipeline.CompileSpec(spec)
	if err != nil {
		printSpecErrors(stderr, spec, err)
		return reported{code: exitUsage}
	}
	fmt.Fprintf(stdout, "ok: %s\n", plan)
	return nil
}

// validateJob runs every check `imgpipe run JOB.yaml` makes before processing anything, and
// reports all that fail in one pass: YAML syntax (which stops the rest), then keys, stages,
// values and the chain's order together, then the required fields, then the paths of
// whatever parsed. path "-" reads the job from stdin.
func validateJob(path string, stdin io.Reader) (*job.Job, error) {
	var j *job.Job
	var err error
	if path == folderrun.StdinInput {
		j, err = job.Read("<stdin>", stdin)
	} else {
		j, err = job.Load(path)
	}
	if j == nil {
		return nil, err
	}
	errs := pipeline.Errors(err)
	if err == nil {
		// Complete's "no pipeline"-style errors would only repeat a field's own error.
		errs = append(errs, pipeline.Errors(j.Complete())...)
	}
	if j.InputDir != "" {
		if err := folderrun.CheckPaths(jobRequest(j)); err != nil {
			var bad *folderrun.RequestError
			if errors.As(err, &bad) {
				err = bad.Err
			}
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return nil, pipeline.ErrorList(errs)
	}
	return j, nil
}
