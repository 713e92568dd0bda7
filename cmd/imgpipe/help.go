package main

import (
	"embed"
	"strings"

	"github.com/spf13/cobra"
)

// helpFiles hold the commands' long help: help/NAME.txt is the description, a line "--",
// then the examples.
//
//go:embed help/*.txt
var helpFiles embed.FS

// withHelp sets cmd's Long and Example from help/name.txt and returns cmd. A missing file
// is a build mistake that every test of the CLI reports.
func withHelp(name string, cmd *cobra.Command) *cobra.Command {
	b, err := helpFiles.ReadFile("help/" + name + ".txt")
	if err != nil {
		panic(err)
	}
	long, examples, _ := strings.Cut(string(b), "\n--\n")
	cmd.Long, cmd.Example = long, strings.TrimSuffix(examples, "\n")
	return cmd
}
