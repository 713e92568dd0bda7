package folderrun

import (
	"context"
	"errors"
	"io"
	"math"
	"os"
	"strings"

	"github.com/imgpipe/imgpipe/blobio"
	"github.com/imgpipe/imgpipe/pipeline"
)

// inputs says where a run's inputs come from: a folder or bucket walked, a single file, or
// a list of paths (read once from stdin, so that a count and the run see one list); with
// execution.shard, only the inputs of that shard.
type inputs struct {
	dir     string       // the folder or bucket URL walked; "" for files
	store   blobio.Store // dir's store; nil for files
	files   []string     // the single file or the listed paths
	sel     pipeline.Selection
	exclude string // what the walk leaves out (outputPrefix)
	name    string // the outputs' name template; "" for none
	shard   [2]int // index and count; count 0 for no shard
}

// openInputs reads the request's input: StdinInput reads the list of paths on stdin, a
// bucket URL is walked, a file is the one input, anything else is a folder (CheckPaths
// has checked it).
func openInputs(ctx context.Context, r *Request, sel pipeline.Selection) (*inputs, error) {
	in := &inputs{sel: sel, exclude: outputPrefix(r), name: r.Name}
	if r.Exec.Shard != "" {
		i, n, _ := pipeline.ParseShard(r.Exec.Shard) // the settings table checked it
		in.shard = [2]int{i, n}
	}
	if r.Input == StdinInput {
		var paths []string
		var err error
		switch {
		case r.Stdin != nil && r.NullList:
			paths, err = pipeline.ReadNullList(r.Stdin)
		case r.Stdin != nil:
			paths, err = pipeline.ReadFileList(r.Stdin)
		}
		if err != nil {
			return nil, badf("-i -: %v", err)
		}
		if len(paths) == 0 {
			return nil, badf("-i -: no paths on stdin (one a line)")
		}
		if r.Work == nil { // a queue worker's paths were checked at submit
			if err := checkListed(r, paths); err != nil {
				return nil, err
			}
		}
		in.files = paths
		return in, nil
	}
	if fi, err := os.Stat(r.Input); err == nil && !fi.IsDir() && !blobio.IsURL(r.Input) {
		in.files = []string{r.Input}
		return in, nil
	}
	store, err := blobio.OpenStore(ctx, r.Input)
	if err != nil {
		return nil, failf("input: %v", err)
	}
	in.dir, in.store = r.Input, store
	return in, nil
}

// outputPrefix is what the input walk leaves out: the output folder, or, when input and
// output are prefixes of one bucket, the output's prefix inside the input's.
func outputPrefix(r *Request) string {
	if !blobio.IsURL(r.Output) {
		return r.Output
	}
	in, out := strings.TrimSuffix(r.Input, "/")+"/", r.Output
	if rest, ok := strings.CutPrefix(out, in); ok {
		return strings.TrimSuffix(rest, "/")
	}
	return ""
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
	if in.name != "" {
		src = pipeline.Rename(src, in.name)
	}
	if in.shard[1] > 0 {
		src = pipeline.Shard(src, in.shard[0], in.shard[1])
	}
	return src
}

// count walks the inputs once, cheaply: -1 if that fails.
func (in *inputs) count() int { return in.countUpTo(context.Background(), math.MaxInt-1) }

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
