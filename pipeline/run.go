package pipeline

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/imgpipe/imgpipe/stages"
)

// Options controls a run.
type Options struct {
	// Workers is the number of inputs processed at once, each by one goroutine running the
	// whole chain on it; 0 means GOMAXPROCS. Stages are single-threaded, so this is also
	// the number of cores used.
	Workers int
	// Window bounds the inputs in flight: taken from the source and not yet reported. It
	// bounds memory (and the reorder buffer that keeps results in input order) whatever the
	// number of inputs. 0 means 2×Workers; it is raised to Workers if lower.
	Window int
	// StopOnError stops taking inputs at the first failed one (on_error: fail). Inputs
	// already being processed are finished and reported. Otherwise a failed input is
	// reported and the run goes on (on_error: skip).
	StopOnError bool
	// Report receives the JSON Lines report: one line per input in input order, then the
	// summary line. nil for none.
	Report io.Writer
	// Progress, if set, is called for every result, in input order, one at a time.
	Progress func(*Result)
	// Device names where pixel stages run, for the summary; "" means "cpu".
	Device string
	// Trace, if set, receives a span per stage per input, on one track per worker.
	Trace Tracer
}

// ErrStopped is returned (wrapped, with the failure) when StopOnError stopped a run.
var ErrStopped = errors.New("stopped at the first failed input")

// Run processes every input of src through plan and hands the results to sink. Results
// reach sink.Done, Progress and the report in input order, whatever the number of workers.
//
// Failures of single inputs are not errors of Run: they are results with Status failed.
// Run returns an error when the run did not cover every input: ctx was cancelled (the error
// is ctx's; inputs being processed are finished, the others are not started), StopOnError
// stopped it (ErrStopped), or something fatal happened (the source failed, the report or
// sink.Done could not be written). The Summary counts what was reported in every case, and
// the report, if any, always ends with the summary line.
func Run(ctx context.Context, plan *Plan, src Source, sink Sink, opt Options) (Summary, error) {
	if plan == nil || plan.Decode == nil {
		return Summary{}, errors.New("run: the plan has no decode stage; build it with Compile")
	}
	if src == nil || sink == nil {
		return Summary{}, errors.New("run: nil source or sink")
	}
	if opt.Workers < 0 || opt.Window < 0 {
		return Summary{}, fmt.Errorf("run: negative workers (%d) or window (%d)", opt.Workers, opt.Window)
	}
	if opt.Workers == 0 {
		opt.Workers = runtime.GOMAXPROCS(0)
	}
	if opt.Window == 0 {
		opt.Window = 2 * opt.Workers
	}
	opt.Window = max(opt.Window, opt.Workers)
	if opt.Device == "" {
		opt.Device = "cpu"
	}
	r := &runner{
		plan:   plan,
		src:    src,
		sink:   sink,
		opt:    opt,
		report: newReportWriter(opt.Report),
		window: make(chan struct{}, opt.Window),
		jobs:   make(chan *item),
		done:   make(chan *item, opt.Window),
		stop:   make(chan struct{}),
	}
	r.sum = Summary{Device: opt.Device, Workers: opt.Workers, Pipeline: plan.String()}
	start := time.Now()
	r.ctx, r.cancel = context.WithCancelCause(ctx)
	defer r.cancel(nil)

	var g errgroup.Group
	g.Go(func() error {
		err := r.feed()
		if err != nil {
			r.cancel(err)
		}
		return err
	})
	var workers sync.WaitGroup
	for i := 0; i < opt.Workers; i++ {
		workers.Add(1)
		g.Go(func() error {
			defer workers.Done()
			r.work(fmt.Sprintf("cpu worker %d", i+1))
			return nil
		})
	}
	g.Go(func() error {
		workers.Wait()
		close(r.done)
		return nil
	})
	g.Go(func() error { return r.collect(ctx) })
	err := g.Wait()

	r.sum.finish(time.Since(start).Seconds())
	switch {
	case ctx.Err() != nil:
		// Whatever else failed on the way out (a sink send) was caused by the interrupt.
		r.sum.Interrupted = true
		err = ctx.Err()
	case err != nil:
	case r.failure != nil:
		r.sum.Stopped = true
		err = fmt.Errorf("%w: %s: %v", ErrStopped, r.failure.Input, r.failure.Err)
	}
	if rerr := r.report.summary(r.sum); rerr != nil && err == nil {
		err = fmt.Errorf("report: %w", rerr)
	}
	return r.sum, err
}

// item is one input on its way through a run.
type item struct {
	idx     int
	in      Input
	res     Result
	dropped bool // taken from the source but never started (cancelled or stopped)
}

type runner struct {
	plan   *Plan
	src    Source
	sink   Sink
	opt    Options
	report *reportWriter
	ctx    context.Context // cancelled on interrupt or fatal error
	cancel context.CancelCauseFunc

	window chan struct{} // one token per input in flight
	jobs   chan *item
	done   chan *item

	stop     chan struct{} // closed by StopOnError at the first failure
	stopOnce sync.Once
	mu       sync.Mutex
	failure  *Result // the earliest failure under StopOnError

	sum Summary // owned by collect
}

func (r *runner) stopped() bool {
	select {
	case <-r.stop:
		return true
	default:
		return false
	}
}

// feed takes inputs from the source while the window has room.
func (r *runner) feed() error {
	defer close(r.jobs)
	for idx := 0; ; idx++ {
		select {
		case r.window <- struct{}{}:
		case <-r.ctx.Done():
			return nil
		case <-r.stop:
			return nil
		}
		if r.ctx.Err() != nil || r.stopped() {
			return nil
		}
		in, err := r.src.Next(r.ctx)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			if r.ctx.Err() != nil {
				return nil // the source noticed the cancellation first
			}
			return fmt.Errorf("source: %w", err)
		}
		select {
		case r.jobs <- &item{idx: idx, in: in}:
		case <-r.ctx.Done():
			return nil
		}
	}
}

// work processes inputs until the source is drained; once the run is cancelled or
// stopped it only passes the remaining ones on as dropped.
func (r *runner) work(track string) {
	w := &worker{track: track}
	for it := range r.jobs {
		if r.ctx.Err() != nil || r.after(it.idx) {
			it.dropped = true
		} else {
			r.process(it, w)
			if it.res.Status == StatusFailed && r.opt.StopOnError {
				r.fail(it)
			}
		}
		r.done <- it
	}
}

// fail records a failed input under StopOnError: the run stops taking inputs, and inputs
// after the earliest failure that have not started are dropped. Inputs before it are still
// processed, so the report covers every input up to the failure.
func (r *runner) fail(it *item) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.failure == nil || it.idx < r.failure.Index {
		res := it.res
		r.failure = &res
	}
	r.stopOnce.Do(func() { close(r.stop) })
}

// after reports whether StopOnError has stopped the run at an input before idx.
func (r *runner) after(idx int) bool {
	if !r.stopped() {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return idx > r.failure.Index
}

// collect reorders finished items into input order and hands them on. It drains done to
// the end even after a fatal error, so that no worker is left blocked.
func (r *runner) collect(ctx context.Context) error {
	pending := map[int]*item{}
	next := 0
	var fatal error
	for it := range r.done {
		pending[it.idx] = it
		for {
			p, ok := pending[next]
			if !ok {
				break
			}
			delete(pending, next)
			next++
			if !p.dropped && fatal == nil {
				if fatal = r.emit(ctx, &p.res); fatal != nil {
					r.cancel(fatal) // stop feeding and working; keep draining
				}
			}
			<-r.window
		}
	}
	return fatal
}

func (r *runner) emit(ctx context.Context, res *Result) error {
	switch res.Status {
	case StatusOK:
		r.sum.OK++
		r.sum.Megapixels += float64(res.Width) * float64(res.Height) / 1e6
	case StatusFailed:
		r.sum.Failed++
	case StatusSkipped:
		r.sum.Skipped++
	}
	r.report.line(res)
	if r.report != nil && r.report.err != nil {
		return fmt.Errorf("report: %w", r.report.err)
	}
	if err := r.sink.Done(ctx, res); err != nil {
		return fmt.Errorf("sink: %w", err)
	}
	if r.opt.Progress != nil {
		r.opt.Progress(res)
	}
	return nil
}

// process runs the chain on one input. A panic in a stage (a decoder bug on a hostile
// file) fails that input instead of the run.
func (r *runner) process(it *item, w *worker) {
	sc := &w.bufs
	in := it.in
	res := &it.res
	*res = Result{Index: it.idx, Input: in.Name}
	stage := r.plan.Steps[0].Def.Name
	defer func() {
		if p := recover(); p != nil {
			res.Status = StatusFailed
			res.Image = nil
			res.Err = &StageError{Stage: stage, Err: fmt.Errorf("panic: %v", p)}
		}
	}()
	fail := func(stage string, err error) {
		res.Status = StatusFailed
		res.Image = nil
		res.Err = &StageError{Stage: stage, Err: err}
	}
	switch {
	case in.Err != nil:
		res.Status = StatusFailed
		res.Err = in.Err
		return
	case in.Previous != nil:
		p := in.Previous
		res.Status = StatusSkipped
		res.Output, res.Width, res.Height = p.Output, p.Width, p.Height
		if len(p.Histogram) == 256 {
			res.Histogram = new([256]uint64)
			copy(res.Histogram[:], p.Histogram)
		}
		return
	}

	t0 := time.Now()
	img, owned, err := r.decode(in, sc)
	r.span(w.track, stage, in.Name, t0)
	if err != nil {
		fail(stage, err)
		return
	}
	res.Width, res.Height = img.W, img.H
	if r.plan.HasHistogram() {
		res.Histogram = new([256]uint64)
	}
	for _, ps := range r.plan.Pixels {
		stage = ps.Def.Name
		t0 := time.Now()
		out, same := ps.Def.Shape(ShapeOf(img), ps.Params)
		if same {
			ps.Run(nil, img, res.Histogram)
			r.span(w.track, stage, in.Name, t0)
			continue
		}
		dst := sc.get(out.W, out.H, out.C)
		ps.Run(dst, img, res.Histogram)
		r.span(w.track, stage, in.Name, t0)
		if owned {
			sc.put(img)
		}
		img, owned = dst, true
	}
	res.Image = img
	if r.plan.Save != nil {
		stage = r.plan.Save.Def.Name
		res.Output = outputName(in, r.plan.Save.Ext)
	}
	var enc *Encoder
	if r.plan.Save != nil {
		enc = r.plan.Save.Encoder
	}
	t0 = time.Now()
	err = r.sink.Write(r.ctx, res, enc)
	if enc != nil {
		r.span(w.track, stage, in.Name, t0)
	}
	if err != nil {
		fail(stage, pathless(err))
		res.Output = ""
		return
	}
	if res.Image == nil && owned {
		sc.put(img) // the sink is done with it
	}
	res.Status = StatusOK
}

func (r *runner) span(track, stage, input string, start time.Time) {
	if r.opt.Trace != nil {
		r.opt.Trace.Span(track, stage, start, time.Since(start), map[string]any{"input": input})
	}
}

// decode turns an input into pixels. owned tells whether the pixels belong to the run (and
// may be recycled) rather than to the caller.
func (r *runner) decode(in Input, sc *scratch) (img *stages.Image, owned bool, err error) {
	dec := r.plan.Decode
	if in.Image != nil {
		if err := in.Image.Check(); err != nil {
			return nil, false, err
		}
		if px := int64(in.Image.W) * int64(in.Image.H); px > dec.MaxPixels {
			return nil, false, fmt.Errorf("image is %dx%d (%.1f MP), over the %.1f MP limit", in.Image.W, in.Image.H, float64(px)/1e6, float64(dec.MaxPixels)/1e6)
		}
		return in.Image, false, nil
	}
	data := in.Data
	if data == nil {
		if in.Path == "" {
			return nil, false, errors.New("input has no path, data or image")
		}
		if data, err = readFile(in.Path, dec); err != nil {
			return nil, false, err
		}
	}
	img, err = dec.Decode(data, func(w, h, c int) (*stages.Image, error) { return sc.get(w, h, c), nil })
	if err != nil {
		return nil, false, err
	}
	if err := img.Check(); err != nil {
		return nil, false, fmt.Errorf("decoder returned a bad image: %w", err)
	}
	return img, true, nil
}

// readFile reads a whole input file. Anything but a regular file (a FIFO would block), a
// file over the decoder's size limit, and a file whose first bytes the decoder refuses
// are refused before the file is read whole.
func readFile(path string, dec *Decoder) ([]byte, error) {
	limit := dec.MaxFileBytes()
	fi, err := os.Stat(path)
	if err != nil {
		return nil, pathless(err)
	}
	if !fi.Mode().IsRegular() {
		return nil, errors.New("not a regular file")
	}
	if fi.Size() > limit {
		return nil, fmt.Errorf("file is %d bytes, over the %d-byte limit that max_pixels implies", fi.Size(), limit)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, pathless(err)
	}
	defer f.Close()
	var buf bytes.Buffer
	if dec.Head != nil {
		buf.Grow(int(min(fi.Size(), HeadBytes)) + bytes.MinRead)
		if _, err := buf.ReadFrom(io.LimitReader(f, HeadBytes)); err != nil {
			return nil, pathless(err)
		}
		if err := dec.Head(buf.Bytes()); err != nil {
			return nil, err
		}
	}
	buf.Grow(int(fi.Size()) - buf.Len() + bytes.MinRead)
	// Read at most limit+1 bytes, in case the file grew since Stat.
	if _, err := buf.ReadFrom(io.LimitReader(f, limit+1-int64(buf.Len()))); err != nil {
		return nil, pathless(err)
	}
	if int64(buf.Len()) > limit {
		return nil, fmt.Errorf("file grew over the %d-byte limit that max_pixels implies", limit)
	}
	return buf.Bytes(), nil
}

// scratch recycles one worker's pixel buffers between stages and inputs, so a steady run
// does not allocate (and zero) a fresh buffer per stage per image. It holds a few buffers
// at most, so a worker's memory is bounded by its largest images.
type scratch struct {
	free [][]byte
}

// worker is one worker goroutine's own state.
type worker struct {
	track string // its trace track
	bufs  scratch
}

const scratchKeep = 3

// get returns a w×h×c image whose pixels are NOT zeroed: every stage writes all of dst.
func (s *scratch) get(w, h, c int) *stages.Image {
	n := w * h * c
	best := -1
	for i, b := range s.free {
		if cap(b) >= n && (best < 0 || cap(b) < cap(s.free[best])) {
			best = i
		}
	}
	var pix []byte
	if best >= 0 {
		pix = s.free[best][:n]
		s.free = append(s.free[:best], s.free[best+1:]...)
	} else {
		pix = make([]byte, n)
	}
	return &stages.Image{W: w, H: h, C: c, Stride: w * c, Pix: pix}
}

// put gives m's buffer back; the smallest buffer is dropped when too many are kept.
func (s *scratch) put(m *stages.Image) {
	s.free = append(s.free, m.Pix[:0])
	if len(s.free) > scratchKeep {
		small := 0
		for i, b := range s.free {
			if cap(b) < cap(s.free[small]) {
				small = i
			}
		}
		s.free = append(s.free[:small], s.free[small+1:]...)
	}
}
