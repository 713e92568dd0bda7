package main

import (
	"io"

	"github.com/spf13/cobra"

	"github.com/imgpipe/imgpipe/pipeline/folderrun"
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
			return folderrun.MergeReports(args, out, stdout)
		},
	})
	merge.Flags().StringVarP(&out, "output", "o", "", "write the merged report here (atomically) instead of to standard output")
	cmd.AddCommand(merge)
	return cmd
}
