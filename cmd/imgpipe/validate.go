package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/imgpipe/imgpipe/pipeline"
	"github.com/imgpipe/imgpipe/pipeline/job"
)

func newValidateCmd(stdout io.Writer) *cobra.Command {
	return withHelp("validate", &cobra.Command{
		Use:   "validate JOB.yaml...",
		Short: "Check job files without running them",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var errs []error
			for _, path := range args {
				j, err := validateJob(path)
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
}

// validateJob runs every check `imgpipe run JOB.yaml` makes before processing anything.
func validateJob(path string) (*job.Job, error) {
	j, err := job.Load(path)
	if err != nil {
		return nil, err
	}
	if err := j.Complete(); err != nil {
		return nil, err
	}
	if err := checkFolders(j); err != nil {
		var ee *exitError
		if errors.As(err, &ee) {
			err = ee.err
		}
		return nil, err
	}
	return j, nil
}
