package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/imgpipe/imgpipe/pipeline"
	"github.com/imgpipe/imgpipe/pipeline/job"
)

func newStagesCmd(stdout io.Writer) *cobra.Command {
	var asJSON, asSchema bool
	cmd := withHelp("stages", &cobra.Command{
		Use:   "stages [STAGE...]",
		Short: "List the stages with their parameters",
		RunE: func(cmd *cobra.Command, args []string) error {
			if asSchema {
				if len(args) > 0 || asJSON {
					return usageError("--json-schema describes every stage: it takes no stage names and no --json")
				}
				return writeJSON(stdout, job.Schema(pipeline.Builtin))
			}
			defs := pipeline.Builtin.Stages()
			if len(args) > 0 {
				defs = defs[:0]
				var errs []error
				for _, name := range args {
					// Parse the name as a one-stage spec to get the same suggestions.
					steps, err := pipeline.ParseSpec(name)
					if err != nil || len(steps) != 1 || strings.ContainsAny(name, " =|") {
						errs = append(errs, usageError("no stage %q (try 'imgpipe stages')", name))
						continue
					}
					defs = append(defs, steps[0].Def)
				}
				if len(errs) > 0 {
					return &exitError{code: exitUsage, err: pipeline.ErrorList(errs)}
				}
			}
			if asJSON {
				return writeStagesJSON(stdout, defs)
			}
			writeStages(stdout, defs, len(args) > 0)
			return nil
		},
	})
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the stages and their parameters as JSON data (the registry's definitions, not a JSON Schema of job files)")
	cmd.Flags().BoolVar(&asSchema, "json-schema", false, "print a JSON Schema (draft 2020-12) of job files, generated from the stages and settings, for editors")
	return cmd
}

// writeStages prints the stage list from the registry as one aligned table; with long set,
// each stage's full description follows the table.
func writeStages(w io.Writer, defs []*pipeline.StageDef, long bool) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "STAGE / PARAMETER\tTYPE\tDEFAULT\tDESCRIPTION")
	for _, d := range defs {
		kind := d.Kind.String() + " stage"
		if d.GPU != nil {
			kind += " +GPU"
		}
		if d.GPUOnly != "" {
			kind += " only"
		}
		fmt.Fprintf(tw, "%s\t%s\t\t%s\n", d.Name, kind, d.Help)
		for _, ps := range d.Params {
			fmt.Fprintf(tw, "  %s\t%s\t%v\t%s\n", ps.Name, paramType(ps), ps.Default, ps.Help)
		}
	}
	tw.Flush()
	if !long {
		fmt.Fprintln(w, "\nWrite parameters as key=value after the stage name: blur sigma=1.5")
		fmt.Fprintln(w, "Stages marked +GPU also run on a GPU (--device cuda), giving the same bits; +GPU only: only there.")
		return
	}
	for _, d := range defs {
		fmt.Fprintf(w, "\n%s:\n", d.Name)
		for _, line := range strings.Split(d.Doc, "\n") {
			fmt.Fprintf(w, "  %s\n", line)
		}
	}
}

func paramType(ps pipeline.ParamSpec) string {
	switch {
	case ps.Kind == pipeline.Enum:
		return strings.Join(ps.Values, "|")
	case ps.Range != nil:
		return ps.Kind.String() + " " + ps.Range.String()
	}
	return ps.Kind.String()
}
