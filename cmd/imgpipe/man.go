package main

import (
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/imgpipe/imgpipe/cmd/imgpipe/internal/manpage"
)

// newManCmd writes the man pages from the commands themselves, so they never disagree
// with --help.
func newManCmd(root *cobra.Command, stdout io.Writer) *cobra.Command {
	return withHelp("man", &cobra.Command{
		Use:   "man [DIR]",
		Short: "Write the man page (imgpipe(1) on stdout, or one page per command into DIR)",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			source := "imgpipe " + moduleVersion(buildInfo()) // no date: the same binary gives the same pages
			if len(args) == 0 {
				return manpage.Write(stdout, root, source)
			}
			if err := os.MkdirAll(args[0], 0o755); err != nil {
				return fatalError("man: %v", err)
			}
			if err := manpage.WriteTree(args[0], root, source); err != nil {
				return fatalError("man: %v", err)
			}
			return nil
		},
	})
}
