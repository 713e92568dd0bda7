package bench

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/imgpipe/imgpipe/cudastage/sched"
	"github.com/imgpipe/imgpipe/pipeline"
)

// Limits checked before anything is allocated. The frame limit matches decode's default
// max_pixels and the peers' (bench/peers/common.py). The settings bench shares with
// 'imgpipe run' (--streams, --batch, --workers, --pinned-mb) are checked by pipeline's
// execution settings table (pipeline.CheckSetting), not here.
const (
	MaxFramePixels = 100_000_000 // pixels of one --size frame
	MaxFrames      = 1 << 24     // --frames and --cpu-frames
	MaxRepeats     = 1000        // --warmup and --repeats
	MaxPoolMB      = 1 << 20     // --max-pool-mb
)

// DefaultCopyBytes is the buffer MeasureCopy times to find the copy limit: large enough for
// the copy engine's peak.
const DefaultCopyBytes = 128 << 20

// DefaultCopyWarmup is how long MeasureCopy copies each way before timing: a GPU that has
// just started raises its clocks and link over a few hundred milliseconds, and a single
// warm-up copy measured it well below its bandwidth, which put the raw run that followed
// above its "copy limit" (bench/results/2026-12-07-code-comments.md#bench).
const DefaultCopyWarmup = 250 * time.Millisecond

// copyReps is how many copies each way MeasureCopy times for the copy limit.
const copyReps = 7

// Options are the settings every mode shares. Errors and notices name them as the CLI and
// the peer scripts spell them (--frames, --repeats, ...).
type Options struct {
	Chain           *Chain // the pixel stages measured
	Width, Height   int    // raw and copy: the frame size
	Frames          int    // raw: frames per timed run; files: the first N inputs (0: all)
	Streams, Batch  []int  // GPU: every combination is one configuration, one result
	Warmup, Repeats int    // untimed runs, then timed runs whose median is reported
	Trace           string // a file for the timeline of the last timed run ("": none)

	// Device is the GPU to measure; nil runs the chain on the CPU only (not for Copy).
	Device sched.Device
	// Others are more GPUs for Raw (--gpu all or a list): each configuration then also
	// runs on Device and Others at once, and its record gives the scaling over Device alone.
	Others []sched.Device
	// NoGPU says why Device is nil when a GPU was wanted (--device auto); it goes into the
	// CPU record's note.
	NoGPU string
	// CopyBytes is the buffer MeasureCopy times for the copy limit; 0 is DefaultCopyBytes.
	CopyBytes int
	// CopyWarmup is how long MeasureCopy copies each way before timing; 0 is
	// DefaultCopyWarmup.
	CopyWarmup time.Duration

	Text    io.Writer           // the human-readable lines and table; nil discards them
	Record  func(*Record) error // receives each result as soon as it is measured; nil: none
	Notice  func(msg string)    // receives warnings (a result that differs from the CPU's...)
	Version string              // the records' "imgpipe" field
}

// Check reports --frames, --warmup and --repeats out of range, each error naming its
// option.
func (o *Options) Check() []error {
	var errs []error
	if o.Frames < 0 || o.Frames > MaxFrames {
		errs = append(errs, fmt.Errorf("--frames %d out of range [0, %d]", o.Frames, MaxFrames))
	}
	if o.Warmup < 0 || o.Warmup > MaxRepeats {
		errs = append(errs, fmt.Errorf("--warmup %d out of range [0, %d]", o.Warmup, MaxRepeats))
	}
	if o.Repeats < 1 || o.Repeats > MaxRepeats {
		errs = append(errs, fmt.Errorf("--repeats %d out of range [1, %d]", o.Repeats, MaxRepeats))
	}
	return errs
}

func (o *Options) textf(format string, args ...any) {
	if o.Text != nil {
		fmt.Fprintf(o.Text, format, args...)
	}
}

func (o *Options) notice(format string, args ...any) {
	if o.Notice != nil {
		o.Notice(fmt.Sprintf(format, args...))
	}
}

// emit hands r to o.Record, stamped with the version.
func (o *Options) emit(r *Record) error {
	if o.Record == nil {
		return nil
	}
	r.Imgpipe = o.Version
	if err := o.Record(r); err != nil {
		return fmt.Errorf("writing the record: %w", err)
	}
	return nil
}

// writeTrace writes the timeline of the last timed run to o.Trace and says so, with hint
// after the span count; a nil tr (no trace asked for) does nothing.
func (o *Options) writeTrace(tr *sched.Trace, hint string) error {
	if tr == nil {
		return nil
	}
	if err := tr.WriteFile(o.Trace); err != nil {
		return fmt.Errorf("--trace: %w", err)
	}
	o.textf("trace of the last timed run: %s (%d spans%s)\n", o.Trace, tr.Len(), hint)
	return nil
}

// OptionError is a bad option value (or an unusable input named by one), found before
// anything was measured: the CLI's usage error.
type OptionError struct {
	Err error // what is wrong, naming the option
}

// Error is the message of the bad value.
func (e *OptionError) Error() string { return e.Err.Error() }

// Unwrap returns the underlying error.
func (e *OptionError) Unwrap() error { return e.Err }

func optionErrorf(format string, args ...any) error {
	return &OptionError{Err: fmt.Errorf(format, args...)}
}

// ParseList parses "4" or "1,2,4,8" (--streams, --batch) into distinct values, in the
// order given, each a valid value of the execution setting called setting ("streams").
func ParseList(s, setting string) ([]int, error) {
	if strings.TrimSpace(s) == "" {
		return nil, errors.New("empty list")
	}
	var out []int
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		n, err := strconv.Atoi(part)
		if err != nil {
			return nil, fmt.Errorf("%q is not a whole number", part)
		}
		if err := pipeline.CheckSetting(setting, n); err != nil {
			return nil, err
		}
		if slices.Contains(out, n) {
			return nil, fmt.Errorf("%d is listed twice", n)
		}
		out = append(out, n)
	}
	return out, nil
}

// ParseSize parses WxH (--size), refusing non-positive sides and frames over
// MaxFramePixels.
func ParseSize(s string) (w, h int, err error) {
	a, b, ok := strings.Cut(strings.ToLower(strings.TrimSpace(s)), "x")
	if ok {
		w, err = strconv.Atoi(a)
		if err == nil {
			h, err = strconv.Atoi(b)
		}
	}
	if !ok || err != nil {
		return 0, 0, fmt.Errorf("%q: want WxH, like 1920x1080", s)
	}
	if w < 1 || h < 1 {
		return 0, 0, fmt.Errorf("%q: width and height must be positive", s)
	}
	if int64(w)*int64(h) > MaxFramePixels {
		return 0, 0, fmt.Errorf("%q: %d pixels, over the limit of %d", s, int64(w)*int64(h), MaxFramePixels)
	}
	return w, h, nil
}

// frameBatches is o.Batch with the batch setting's 0 (auto) as pipeline.DefaultBatch: the
// modes that run frames have no device decoder to size batches by (a folder run resolves
// 0 itself, see gpu.Options.Batch).
func (o *Options) frameBatches() []int {
	b := slices.Clone(o.Batch)
	for i := range b {
		b[i] = cmp.Or(b[i], pipeline.DefaultBatch)
	}
	return b
}
