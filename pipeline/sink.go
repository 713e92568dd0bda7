package pipeline

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/imgpipe/imgpipe/stages"
	"github.com/imgpipe/imgpipe/stages/npy"
)

// Result is what became of one input.
type Result struct {
	// Index is the input's position in the source, from 0.
	Index int
	// Input is the input's Name.
	Input string
	// Output is the output's path relative to the output folder, when the chain saves.
	Output string
	// Status is ok, failed or skipped.
	Status Status
	// Size and ModTime are the input file's, as the source saw them (Input.Size and
	// ModTime); the report records them for Resume.
	Size    int64
	ModTime time.Time
	// Width and Height are those of the decoded input (0 when decoding failed).
	Width, Height int
	// Decoder names the decoder that made the pixels ("go", "turbo", "nvjpeg-hw", ...);
	// Encoder the save stage's encoding ("png-fast", "jpeg", ...) of a saved output.
	Decoder, Encoder string
	// DecodeScale is the DCT scale the decoder applied ("1/2", "1/4", "1/8"), "" at full
	// size (decode scale=...; Width and Height are the scaled size).
	DecodeScale string
	// Histogram is set when the chain has a histogram stage.
	Histogram *[256]uint64
	// Image is the final image. ToFolder drops it once written, to free memory early.
	Image *stages.Image
	// Array is the final array of an array chain (load | ...), kept like Image; Shape is
	// the loaded array's shape and Reductions the values of its reducing stages, in
	// chain order, for the report.
	Array      *npy.Array
	Shape      []int
	Reductions []Reduction
	// Encoded holds the encoded output for sinks that keep it in memory (Collect, ToChan).
	Encoded []byte
	// Err is the failure, as "stage: reason" (a *StageError, or the source's error).
	Err error
}

// StageError is an input's failure in one stage; it reads "stage: reason".
type StageError struct {
	Stage string
	Err   error
}

// Error formats the failure as "stage: reason".
func (e *StageError) Error() string { return e.Stage + ": " + e.Err.Error() }

// Unwrap returns the reason.
func (e *StageError) Unwrap() error { return e.Err }

// Sink receives the results of a run.
type Sink interface {
	// Write stores the output of an input that went through the chain, encoding it with
	// enc (nil when the chain has no save stage). Workers call it concurrently, one call
	// per input; an error fails that input as "save: reason".
	Write(ctx context.Context, r *Result, enc *Encoder) error
	// Done is called for every result, ok or not, one at a time, in input order. An error
	// is fatal to the run.
	Done(ctx context.Context, r *Result) error
}

// ToFolder returns a sink that writes each output into dir at its Result.Output path,
// creating subfolders. Writes are atomic (temporary file, fsync, rename): an output is
// complete or absent, whatever happens to the run. In Run, outputs are committed in groups
// just before their inputs are reported (one sync of the file system per group, see
// stages.CommitIn), so a reported output is in place and durable. Outputs land only inside dir: a
// subfolder that is a symbolic link fails the input ("save: a is a symbolic link; ..."),
// so a link such as OUT/a -> ../IN/a cannot lead outputs onto inputs.
//
// The chain must end with a save stage, which says how outputs are encoded; a chain without
// one would write nothing, so Pipeline.Run refuses it before taking any input (and should a
// run get that far, every input fails with the same message). For a report-only chain such
// as "decode | histogram", use Discard.
func ToFolder(dir string) Sink { return folderSink{dir: dir} }

type folderSink struct{ dir string }

// errFolderNoSave is ToFolder's refusal of a chain without a save stage.
var errFolderNoSave = errors.New(`the chain has no save stage, so ToFolder would write nothing: end it with save (e.g. "| save format=png"), or use Discard() for a report-only run`)

// checkPlan refuses a plan whose outputs ToFolder could not write.
func (folderSink) checkPlan(plan *Plan) error {
	if plan.Save == nil {
		return errFolderNoSave
	}
	return nil
}

func (s folderSink) Write(ctx context.Context, r *Result, enc *Encoder) error {
	st, err := s.stage(ctx, r, enc)
	if err != nil {
		return err
	}
	return s.commit([]stages.Staged{st})[0]
}

// stage writes r's output to a temporary file beside its name (stages.StageIn); commit
// puts it in place.
func (s folderSink) stage(_ context.Context, r *Result, enc *Encoder) (stages.Staged, error) {
	if enc == nil {
		r.Image = nil
		return stages.Staged{}, errFolderNoSave
	}
	// IsLocal refuses "", absolute paths and ".." components, but not names that merely
	// start with two dots ("..a.png"), which are ordinary files inside the folder.
	if !filepath.IsLocal(filepath.FromSlash(r.Output)) {
		r.Image = nil
		return stages.Staged{}, fmt.Errorf("output name %q is not a relative path inside the output folder", r.Output)
	}
	m := r.Image
	r.Image, r.Array = nil, nil // an array's encoder holds it
	root, err := s.open()
	if err != nil {
		return stages.Staged{}, err
	}
	defer root.Close()
	return stages.StageIn(root, r.Output, func(w io.Writer) error {
		return enc.Encode(w, m)
	})
}

// commit puts staged outputs in place durably, with one sync of the folder's file system
// for the group (stages.CommitIn); it returns one error per output.
func (s folderSink) commit(files []stages.Staged) []error {
	root, err := s.open()
	if err != nil {
		errs := make([]error, len(files))
		for i := range errs {
			errs[i] = err
		}
		return errs
	}
	defer root.Close()
	return stages.CommitIn(root, files)
}

// discard removes staged outputs that will not be committed (the run failed before
// reporting them).
func (s folderSink) discard(files []stages.Staged) {
	root, err := s.open()
	if err != nil {
		return
	}
	defer root.Close()
	for _, f := range files {
		f.Discard(root)
	}
}

// open opens the output folder, making it if needed. It is opened per use, so that the
// sink holds no descriptor between runs; through it no link inside the folder is followed
// (see stages.WriteFileAtomicIn).
func (s folderSink) open() (*os.Root, error) {
	if err := os.MkdirAll(s.dir, 0o755); err != nil {
		return nil, err
	}
	return os.OpenRoot(s.dir)
}

// stagingSink is a sink that writes in two steps, so that a run makes a group of outputs
// durable at once (ToFolder): stage writes an output as Write would, short of putting it
// in place; commit puts a group of staged outputs in place, returning one error per
// output. The runner stages in its workers and commits in input order, just before
// reporting, so an output is in place and durable before its report line is written.
type stagingSink interface {
	stage(ctx context.Context, r *Result, enc *Encoder) (stages.Staged, error)
	commit(files []stages.Staged) []error
	discard(files []stages.Staged)
}

func (folderSink) Done(context.Context, *Result) error { return nil }

func (folderSink) writesOnly() {}

// writesOnly reports whether sink keeps no image, only the encoded output (ToFolder,
// Discard): a GPU run may then encode on the device. Sinks say so with a writesOnly
// method.
func writesOnly(sink Sink) bool {
	_, ok := sink.(interface{ writesOnly() })
	return ok
}

// checkSink refuses, before a run takes any input, a sink that can do nothing with the
// plan's results (ToFolder without a save stage). Sinks say so with a checkPlan method.
func checkSink(plan *Plan, sink Sink) error {
	if c, ok := sink.(interface{ checkPlan(*Plan) error }); ok && plan != nil {
		if err := c.checkPlan(plan); err != nil {
			return fmt.Errorf("run: %w", err)
		}
	}
	return nil
}

// Discard returns a sink that keeps no output, for report-only chains such as
// "decode | histogram": the report, Options.Progress and each Result's Width, Height and
// Histogram are what such a run gives. Results reach Done without their image (it is
// dropped at once, to free memory). Should the chain have a save stage, the image is still
// encoded, into io.Discard, so an encoder error fails the input as with ToFolder, but
// Result.Output is left empty: no file was written.
func Discard() Sink { return discardSink{} }

type discardSink struct{}

func (discardSink) Write(_ context.Context, r *Result, enc *Encoder) error {
	m := r.Image
	r.Image, r.Array, r.Output = nil, nil, ""
	if enc == nil {
		return nil
	}
	return enc.Encode(io.Discard, m)
}

func (discardSink) Done(context.Context, *Result) error { return nil }

func (discardSink) writesOnly() {}

// Collector is a sink that keeps every result in memory, in input order, with the encoded
// output in Result.Encoded when the chain saves. For small batches and tests.
type Collector struct {
	mu      sync.Mutex
	Results []Result
}

// Collect returns an empty Collector.
func Collect() *Collector { return &Collector{} }

// Write encodes the output into r.Encoded.
func (c *Collector) Write(_ context.Context, r *Result, enc *Encoder) error {
	return encodeInMemory(r, enc)
}

// Done appends r to Results.
func (c *Collector) Done(_ context.Context, r *Result) error {
	c.mu.Lock()
	c.Results = append(c.Results, *r)
	c.mu.Unlock()
	return nil
}

func encodeInMemory(r *Result, enc *Encoder) error {
	if enc == nil {
		return nil
	}
	var b bytes.Buffer
	if err := enc.Encode(&b, r.Image); err != nil {
		return err
	}
	r.Encoded = b.Bytes()
	return nil
}

// ToChan returns a sink that sends every result to ch in input order, with the encoded
// output in Result.Encoded when the chain saves. It does not close ch. A send waits for the
// receiver (back-pressure) or for the run's context to end.
func ToChan(ch chan<- Result) Sink { return chanSink(ch) }

type chanSink chan<- Result

func (c chanSink) Write(_ context.Context, r *Result, enc *Encoder) error {
	return encodeInMemory(r, enc)
}

func (c chanSink) Done(ctx context.Context, r *Result) error {
	select {
	case c <- *r:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
