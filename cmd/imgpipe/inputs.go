package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"

	"github.com/spf13/cobra"

	"github.com/imgpipe/imgpipe/blobio"
	"github.com/imgpipe/imgpipe/pipeline"
	"github.com/imgpipe/imgpipe/pipeline/job"
)

// stdinInput is the -i value that reads a list of paths from stdin.
const stdinInput = "-"

// inputFlags are run's input selection flags.
type inputFlags struct {
	include, exclude, ext []string
}

func (f *inputFlags) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringArrayVar(&f.include, "include", nil, "take only inputs whose relative path matches GLOB (repeatable; ** matches any folders)")
	fl.StringArrayVar(&f.exclude, "exclude", nil, "drop inputs whose relative path matches GLOB (repeatable; wins over --include)")
	fl.StringSliceVar(&f.ext, "ext", nil, "take only these extensions, e.g. jpg,png (default: every format decode reads)")
}

func (f *inputFlags) selection() pipeline.Selection {
	return pipeline.Selection{Include: f.include, Exclude: f.exclude, Exts: f.ext}
}

// inputs says where a run's inputs come from: a folder or bucket walked, a single file, or
// a list of paths (read once from stdin, so that the progress bar's count and the run see
// one list); with execution.shard (--shard I/N), only the inputs of that shard.
type inputs struct {
	dir     string       // the folder or bucket URL walked; "" for files
	store   blobio.Store // dir's store; nil for files
	files   []string     // the single file or the listed paths
	sel     pipeline.Selection
	exclude string // what the walk leaves out (outputPrefix)
	shard   [2]int // index and count; count 0 for no shard
}

// openInputs reads the job's input: "-" reads the list of paths on stdin, a bucket URL is
// walked, a file is the one input, anything else is a folder (checkFolders has checked
// it). close releases a bucket.
func openInputs(ctx context.Context, j *job.Job, sel pipeline.Selection, stdin io.Reader) (*inputs, error) {
	in := &inputs{sel: sel, exclude: outputPrefix(j)}
	if j.Exec.Shard != "" {
		i, n, _ := pipeline.ParseShard(j.Exec.Shard) // the settings table checked it
		in.shard = [2]int{i, n}
	}
	if j.InputDir == stdinInput {
		paths, err := pipeline.ReadFileList(stdin)
		if err != nil {
			return nil, usageError("-i -: %v", err)
		}
		if len(paths) == 0 {
			return nil, usageError("-i -: no paths on stdin (one a line)")
		}
		in.files = paths
		return in, nil
	}
	if fi, err := os.Stat(j.InputDir); err == nil && !fi.IsDir() && !blobio.IsURL(j.InputDir) {
		in.files = []string{j.InputDir}
		return in, nil
	}
	store, err := blobio.OpenStore(ctx, j.InputDir)
	if err != nil {
		return nil, fatalError("input: %v", err)
	}
	in.dir, in.store = j.InputDir, store
	return in, nil
}

// close releases the input's bucket, if any.
func (in *inputs) close() {
	if in.store != nil {
		in.store.Close()
	}
}

// source returns a fresh source of the inputs, from the start.
func (in *inputs) source() pipeline.Source {
	var src pipeline.Source
	if in.store != nil {
		src = in.store.Source(in.exclude, in.sel)
	} else {
		var err error
		if src, err = pipeline.Files(in.files, in.sel); err != nil {
			// Only an unusable working folder makes paths fail to resolve; every input then fails.
			return failingSource{err}
		}
	}
	if in.shard[1] > 0 {
		src = pipeline.Shard(src, in.shard[0], in.shard[1])
	}
	return src
}

// count walks the inputs once, cheaply, for the progress bar's total: -1 if that fails.
func (in *inputs) count() int { return in.countUpTo(context.Background(), math.MaxInt-1) }

// gpuCountLimit is the most inputs a run under --device auto counts before it starts (see
// gpu.Options.Inputs); a larger one starts the GPU at once. A local folder's walk
// takes about 5 µs a file (5,400 files in 22-30 ms on the 2-core development machine),
// and on 16 cores a run of more than 1,000 inputs would need them to cost under 8 ms each
// for the GPU not to pay (a 12 MP photo's thumbnail costs about 14 ms).
const gpuCountLimit = 1000

// countUpTo counts the inputs as count does, at most limit of them: limit+1 means more.
// It gives up with -1 when ctx ends.
func (in *inputs) countUpTo(ctx context.Context, limit int) int {
	src := in.source()
	for n := 0; n <= limit; n++ {
		if _, err := src.Next(ctx); err != nil {
			if errors.Is(err, io.EOF) {
				return n
			}
			return -1
		}
	}
	return limit + 1
}

// failingSource is a source whose first Next fails the run with err.
type failingSource struct{ err error }

func (s failingSource) Next(context.Context) (pipeline.Input, error) { return pipeline.Input{}, s.err }

// dryRun prints each input with the output it would get, and whether --resume would skip
// it, on stdout, then a count on stderr; it writes nothing. src is the run's source (with
// Resume applied under --resume); ext is the save format's extension, "" without save.
func dryRun(ctx context.Context, src pipeline.Source, ext string, stdout, stderr io.Writer, quiet bool) error {
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
		if ext != "" {
			out = in.OutputName(ext)
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
