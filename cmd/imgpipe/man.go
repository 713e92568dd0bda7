package main

import (
	"io"
	"os"

	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"
)

// newManCmd generates the man pages from the commands themselves (cobra's generator), so
// they never disagree with --help.
func newManCmd(root *cobra.Command, stdout io.Writer) *cobra.Command {
	return withHelp("man", &cobra.Command{
		Use:   "man [DIR]",
		Short: "Write the man page (imgpipe(1) on stdout, or one page per command into DIR)",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			header := &doc.GenManHeader{Title: "IMGPIPE", Section: "1", Source: "imgpipe " + moduleVersion(buildInfo())}
			root.DisableAutoGenTag = true // no date: the same binary gives the same pages
			if len(args) == 0 {
				return doc.GenMan(root, header, stdout)
			}
			if err := os.MkdirAll(args[0], 0o755); err != nil {
				return fatalError("man: %v", err)
			}
			if err := doc.GenManTree(root, header, args[0]); err != nil {
				return fatalError("man: %v", err)
			}
			return nil
		},
	})
}
