package main

import (
	"bytes"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/imgpipe/imgpipe/pipeline"
	"github.com/imgpipe/imgpipe/stages"
)

func newReportCmd(stdout io.Writer) *cobra.Command {
	cmd := withHelp("report", &cobra.Command{
		Use:   "report",
		Short: "Work with reports (merge)",
		Args:  cobra.NoArgs,
	})
	var out string
	merge := withHelp("report-merge", &cobra.Command{
		Use:   "merge A.jsonl B.jsonl... [-o FILE]",
		Short: "Merge the reports of shards into one",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runMerge(args, out, stdout)
		},
	})
	merge.Flags().StringVarP(&out, "output", "o", "", "write the merged report here (atomically) instead of to standard output")
	cmd.AddCommand(merge)
	return cmd
}

func runMerge(names []string, out string, stdout io.Writer) error {
	rs := make([]io.Reader, len(names))
	for i, n := range names {
		f, err := os.Open(n)
		if err != nil {
			return usageError("%v", err)
		}
		defer f.Close()
		rs[i] = f
	}
	// Merged in memory first, so that a report that does not merge leaves no output.
	var b bytes.Buffer
	if _, err := pipeline.MergeReports(&b, names, rs...); err != nil {
		return usageError("report merge: %v", err)
	}
	if out == "" {
		_, err := stdout.Write(b.Bytes())
		return err
	}
	if err := stages.WriteFileAtomic(out, func(w io.Writer) error { _, err := w.Write(b.Bytes()); return err }); err != nil {
		return fatalError("report merge: %v", err)
	}
	return nil
}
