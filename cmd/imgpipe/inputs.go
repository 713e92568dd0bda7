package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/imgpipe/imgpipe/pipeline"
)

// dryRun prints each input with the output it would get, and whether --resume would skip
// it, on stdout, then a count on stderr; it writes nothing. src is the run's source (with
// Resume applied under --resume); save is the chain's save stage, nil without one.
func dryRun(ctx context.Context, src pipeline.Source, save *pipeline.SaveStep, stdout, stderr io.Writer, quiet bool) error {
	var n, skipped, failing int
	for {
		in, err := src.Next(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fatalError("%v", err)
		}
		n++
		out := "(no output: the chain does not save)"
		if save != nil {
			out = in.OutputName(save.Ext)
		}
		switch {
		case in.Err != nil:
			failing++
			fmt.Fprintf(stdout, "%s\tfails: %v\n", printable(in.Name), in.Err)
		case in.Previous != nil:
			skipped++
			fmt.Fprintf(stdout, "%s\t-> %s\tskip (done before)\n", printable(in.Name), printable(out))
		default:
			fmt.Fprintf(stdout, "%s\t-> %s\n", printable(in.Name), printable(out))
		}
	}
	if !quiet {
		fmt.Fprintf(stderr, "dry run: %d inputs: %d to process, %d skipped (done before), %d would fail; nothing was written\n",
			n, n-skipped-failing, skipped, failing)
	}
	return nil
}
