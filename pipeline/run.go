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
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/imgpipe/imgpipe/cudastage/sched"
	"github.com/imgpipe/imgpipe/stages"
)

// Options controls a run.
type Options struct {
	// Workers is the number of inputs processed at once, each by one goroutine running the
	// whole chain on it; 0 means GOMAXPROCS. Stages are single-threaded, so this is also
	// the number of cores used. On a GPU it is the number of decode workers, and of save
	// workers.
	Workers int
	// Window bounds the inputs in flight: taken from the source and not yet reported. It
	// bounds memory (and the reorder buffer that keeps results in input order) whatever the
	// number of inputs. 0 means 2×Workers; it is raised to Workers if lower, and on a GPU
	// to what keeps every slot full (see GPUOptions).
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
	// Device names where pixel stages run, for the summary of a CPU run; "" means "cpu".
	// A GPU run reports its device's name.
	Device string
	// GPU, when set, runs the pixel stages on an accelerator (see GPUOptions).
	GPU *GPUOptions
	// Notice, if set, receives the run's one-line notices, such as why a GPU run went to
	// the CPU. The CLI prints them on stderr.
	Notice func(msg string)
	// MemoryBudget bounds, in bytes, the memory of the inputs being decoded and processed at
	// once: each input reserves BytesPerPixel × its header's width × height before it is
	// decoded, and gives it back when it is done (on a GPU, once its pixels are in a batch
	// slot). 0 means DefaultMemoryBudget; a negative value turns the budget off.
	MemoryBudget int64
	// Trace, if set, receives timed spans: on the CPU one per stage per input, on one track
	// per worker; on a GPU the decode and save workers' spans and, from the executor, each
	// batch's H2D, kernels and D2H on one track per stream. sched.NewTrace makes one that
	// writes a Chrome trace-event file.
	Trace Tracer
}

// Tracer records timed spans on named tracks for a timeline view; sched.Trace is the
// implementation that writes Chrome trace-event JSON (Perfetto, chrome://tracing). It is
// the executor's interface, so one trace holds host and device tracks on one time axis.
type Tracer = sched.Tracer

// ErrStopped is returned (wrapped, with the failure) when StopOnError stopped a run.
var ErrStopped = errors.New("stopped at the first failed input")

// Run processes every input of src through plan and hands the results to sink. Results
// reach sink.Done, Progress and the report in input order, whatever the number of workers.
//
// With opt.GPU set, the pixel stages run as one device segment on the GPU (see
// GPUOptions); a plan whose pixel stages cannot all run there (a stage without a GPU
// implementation, or no pixel stage at all) runs wholly on the CPU, and opt.Notice says
// so once. Outputs and histograms are the same bits either way.
//
// Failures of single inputs are not errors of Run: they are results with Status failed.
// Run returns an error when the run did not cover every input: ctx was cancelled (the error
// is ctx's; inputs being processed are finished, the others are not started; on a GPU,
// batches still on the device are abandoned and their inputs not reported), StopOnError
// stopped it (ErrStopped), or something fatal happened (the source failed, the report or
// sink.Done could not be written, a device error: then outputs already written are
// complete, and the inputs of abandoned batches are not reported). The Summary counts what
// was reported in every case, and the report, if any, always ends with the summary line.
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
	var gpu *gpuRun
	if opt.GPU != nil {
		g, err := newGPURun(plan, opt)
		if err != nil {
			return Summary{}, err
		}
		if g == nil {
			opt.GPU = nil // the plan runs on the CPU; newGPURun gave the notice
		} else {
			gpu = g
			opt.Device = g.dev.Name()
			opt.Window = max(opt.Window, g.window(opt.Workers))
		}
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
	r.mem = newMemBudget(opt.MemoryBudget)
	r.sum = Summary{Device: opt.Device, Workers: opt.Workers, Pipeline: plan.String()}
	start := time.Now()
	r.ctx, r.cancel = context.WithCancelCause(ctx)
	defer r.cancel(nil)

	var e *sched.Executor
	if gpu != nil {
		var err error
		// The executor runs under r.ctx: an interrupt or a fatal error of the run stops it,
		// abandoning the batches on the device.
		if e, err = gpu.start(r.ctx, opt.Trace); err != nil {
			r.sum.finish(time.Since(start).Seconds())
			if rerr := r.report.summary(r.sum); rerr != nil {
				err = errors.Join(err, fmt.Errorf("report: %w", rerr))
			}
			return r.sum, err
		}
		r.sum.Streams, r.sum.Batch = gpu.cfg.Streams, gpu.cfg.Batch
	}

	var g errgroup.Group
	g.Go(func() error {
		err := r.feed()
		if err != nil {
			r.cancel(err)
		}
		return err
	})
	if e != nil {
		r.startGPU(&g, e)
	} else {
		r.startCPU(&g)
	}
	g.Go(func() error { return r.collect(ctx) })
	err := g.Wait()

	if e != nil {
		st := e.Stats()
		if cerr := e.Close(); cerr != nil && err == nil && ctx.Err() == nil {
			err = fmt.Errorf("device %s: releasing memory: %w", gpu.dev.Name(), cerr)
		}
		r.sum.gpuStats(st)
		r.sum.CPUFallback = int(r.cpuFallback.Load())
	}
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

// startCPU starts the CPU workers: each runs the whole chain on one input at a time.
func (r *runner) startCPU(g *errgroup.Group) {
	var workers sync.WaitGroup
	for i := 0; i < r.opt.Workers; i++ {
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
}

// item is one input on its way through a run.
type item struct {
	idx     int
	in      Input
	res     Result
	dropped bool // taken from the source but never started (cancelled or stopped)
}

type runner struct {
	mem    *memBudget // nil when off
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

	// GPU runs only.
	inExec      sync.Map     // idx → *item: committed to the executor, result not yet taken
	cpuFallback atomic.Int64 // images that ran on the CPU path instead
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

// settle finishes an input that needs no work: one the source could not provide (failed)
// or one an earlier run did (skipped). It reports whether it did.
func (r *runner) settle(it *item) bool {
	in := it.in
	res := &it.res
	*res = Result{Index: it.idx, Input: in.Name}
	switch {
	case in.Err != nil:
		res.Status = StatusFailed
		res.Err = in.Err
		return true
	case in.Previous != nil:
		p := in.Previous
		res.Status = StatusSkipped
		res.Output, res.Width, res.Height = p.Output, p.Width, p.Height
		if len(p.Histogram) == 256 {
			res.Histogram = new([256]uint64)
			copy(res.Histogram[:], p.Histogram)
		}
		return true
	}
	return false
}

// failWith records an input's failure in a stage.
func failWith(res *Result, stage string, err error) {
	res.Status = StatusFailed
	res.Image = nil
	res.Err = &StageError{Stage: stage, Err: err}
}

// process runs the chain on one input on the CPU. A panic in a stage (a decoder bug on a
// hostile file) fails that input instead of the run.
func (r *runner) process(it *item, w *worker) {
	if r.settle(it) {
		return
	}
	stage := r.plan.Steps[0].Def.Name
	defer func() {
		if p := recover(); p != nil {
			failWith(&it.res, stage, fmt.Errorf("panic: %v", p))
		}
	}()
	t0 := time.Now()
	img, owned, release, err := r.decode(it.in, &w.bufs)
	r.span(w.track, stage, it.in.Name, t0)
	if err != nil {
		if r.ctx.Err() != nil && errors.Is(err, r.ctx.Err()) {
			it.dropped = true // interrupted while waiting for memory: never started
			return
		}
		failWith(&it.res, stage, err)
		return
	}
	defer release()
	r.cpuChain(it, w, img, owned)
}

// cpuChain runs the pixel stages on a decoded image on the CPU and stores the result.
// owned tells whether img belongs to the run (and may be recycled).
func (r *runner) cpuChain(it *item, w *worker, img *stages.Image, owned bool) {
	sc := &w.bufs
	res := &it.res
	stage := r.plan.Steps[0].Def.Name
	defer func() {
		if p := recover(); p != nil {
			failWith(res, stage, fmt.Errorf("panic: %v", p))
		}
	}()
	res.Width, res.Height = img.W, img.H
	if r.plan.HasHistogram() {
		res.Histogram = new([256]uint64)
	}
	for _, ps := range r.plan.Pixels {
		stage = ps.Def.Name
		t0 := time.Now()
		out, passThrough := ps.Def.Shape(img.Shape(), ps.Params)
		if passThrough {
			ps.Run(nil, img, res.Histogram)
			r.span(w.track, stage, it.in.Name, t0)
			continue
		}
		dst := sc.get(out.W, out.H, out.C)
		ps.Run(dst, img, res.Histogram)
		r.span(w.track, stage, it.in.Name, t0)
		if owned {
			sc.put(img)
		}
		img, owned = dst, true
	}
	res.Image = img
	r.store(it, w.track)
	if res.Image == nil && owned {
		sc.put(img) // the sink is done with it
	}
}

// store hands res.Image, the final image, to the sink, which saves it when the chain has
// a save stage, and sets the result's status. The sink may drop res.Image (ToFolder does)
// or keep it.
func (r *runner) store(it *item, track string) {
	res := &it.res
	var enc *Encoder
	stage := "sink"
	if r.plan.Save != nil {
		enc = r.plan.Save.Encoder
		stage = r.plan.Save.Def.Name
		res.Output = outputName(it.in, r.plan.Save.Ext)
	}
	t0 := time.Now()
	err := r.sink.Write(r.ctx, res, enc)
	if enc != nil {
		r.span(track, stage, it.in.Name, t0)
	}
	if err != nil {
		failWith(res, stage, pathless(err))
		res.Output = ""
		return
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
// release gives back the input's share of the memory budget once the caller is done with it.
func (r *runner) decode(in Input, sc *scratch) (img *stages.Image, owned bool, release func(), err error) {
	if in.Image != nil {
		if err := r.checkImage(in.Image); err != nil {
			return nil, false, nil, err
		}
		return in.Image, false, func() {}, nil
	}
	img, release, err = r.decodeInto(in, func(w, h, c int) (*stages.Image, error) { return sc.get(w, h, c), nil })
	return img, err == nil, release, err
}

// checkImage checks pixels given as an input against the decoder's pixel limit.
func (r *runner) checkImage(m *stages.Image) error {
	if err := m.Check(); err != nil {
		return err
	}
	if px := int64(m.W) * int64(m.H); px > r.plan.Decode.MaxPixels {
		return fmt.Errorf("image is %dx%d (%.1f MP), over the %.1f MP limit", m.W, m.H, float64(px)/1e6, float64(r.plan.Decode.MaxPixels)/1e6)
	}
	return nil
}

// decodeInto turns an input into pixels in memory from alloc, which is called once, after
// the pixels were decoded (a failing file takes no memory from it). Pixels given as the
// input are checked and copied. Before decoding it reserves the image's share of the memory
// budget (from the header's size); release gives it back, and is nil when err is not.
func (r *runner) decodeInto(in Input, alloc stages.Alloc) (img *stages.Image, release func(), err error) {
	if in.Image != nil {
		if err := r.checkImage(in.Image); err != nil {
			return nil, nil, err
		}
		dst, err := alloc(in.Image.W, in.Image.H, in.Image.C)
		if err != nil {
			return nil, nil, err
		}
		for y := 0; y < dst.H; y++ {
			copy(dst.Row(y), in.Image.Row(y))
		}
		return dst, func() {}, nil
	}
	data := in.Data
	if data == nil {
		if in.Path == "" {
			return nil, nil, errors.New("input has no path, data or image")
		}
		if data, err = readFile(in.Path, r.plan.Decode); err != nil {
			return nil, nil, err
		}
	}
	var pixels int64
	if r.plan.Decode.Pixels != nil {
		if pixels, err = r.plan.Decode.Pixels(data); err != nil {
			return nil, nil, err
		}
	}
	if release, err = r.mem.acquire(r.ctx, pixels); err != nil {
		return nil, nil, err
	}
	img, err = r.plan.Decode.Decode(data, alloc)
	if err == nil {
		if cerr := img.Check(); cerr != nil {
			err = fmt.Errorf("decoder returned a bad image: %w", cerr)
		}
	}
	if err != nil {
		release()
		return nil, nil, err
	}
	return img, release, nil
}

// readFile reads a whole input file. Anything but a regular file (a FIFO would block), a
// file over the decoder's size limit, and a file whose first bytes the decoder refuses
// are refused before the file is read whole.
func readFile(path string, dec *Decoder) ([]byte, error) {
	limit := dec.MaxFileBytes()
	// O_NONBLOCK so that a FIFO (or a file swapped for one since the folder was walked) is
	// opened without waiting for a writer; the checks below then look at what was opened.
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, pathless(err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, pathless(err)
	}
	if !fi.Mode().IsRegular() {
		return nil, errors.New("not a regular file")
	}
	if fi.Size() > limit {
		return nil, fmt.Errorf("file is %d bytes, over the %d-byte limit that max_pixels implies", fi.Size(), limit)
	}
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
