package pipeline

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"sync"
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
	// Window bounds the inputs in flight: taken from the source and not yet reported, or,
	// for an input whose output is staged (see ToFolder), not yet processed: it then holds
	// only its result while it waits for the inputs before it and for its group's commit.
	// It bounds memory whatever the number of inputs. 0 means 2×Workers; it is raised to
	// Workers if lower, and to what keeps the backend busy (BoundBackend.Window). The
	// reorder buffer that keeps results in input order holds at most ReorderSpan×Window
	// inputs, so that one slow input (a large photo) does not stop the others.
	Window int
	// StopOnError stops taking inputs at the first failed one (on_error: fail). Inputs
	// already being processed are finished and reported. Otherwise a failed input is
	// reported and the run goes on (on_error: skip).
	StopOnError bool
	// Report receives the JSON Lines report: one line per input in input order, then the
	// summary line. nil for none. Each line is written through as its input is reported,
	// and a Report with a Sync method (an *os.File) is synced at most every
	// ReportSyncInterval and at the end, so the file is a journal that a killed run leaves
	// readable up to its last reported input (Resume reads it).
	Report io.Writer
	// Progress, if set, is called for every result, in input order, one at a time.
	Progress func(*Result)
	// Device names where pixel stages run, for the summary of a CPU run; "" means "cpu".
	// A GPU run reports its device's name.
	Device string
	// Backend, when set, runs the pixel stages elsewhere than on the CPU workers: package
	// pipeline/gpu's Options and Set run them on accelerators. nil runs on the CPU.
	Backend Backend
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

// ReorderSpan bounds the inputs taken and not yet reported to ReorderSpan×Options.Window.
// Past the window, those inputs hold only their results: with a span of 16, one input
// 16 times slower than the others holds up no worker.
const ReorderSpan = 16

// ErrStopped is returned (wrapped, with the failure) when StopOnError stopped a run.
var ErrStopped = errors.New("stopped at the first failed input")

// Run processes every input of src through plan and hands the results to sink. Results
// reach sink.Done, Progress and the report in input order, whatever the number of workers.
//
// With opt.Backend set, the pixel stages run there (on a GPU: as one device segment, see
// package pipeline/gpu); a plan whose pixel stages cannot all run there (a stage without a
// GPU implementation, or no pixel stage at all) runs wholly on the CPU, and opt.Notice says
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
	if plan == nil || (plan.Decode == nil && plan.Load == nil) {
		return Summary{}, errors.New("run: the plan has no source stage; build it with Compile")
	}
	if src == nil || sink == nil {
		return Summary{}, errors.New("run: nil source or sink")
	}
	if err := checkSink(plan, sink); err != nil {
		return Summary{}, err
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
	if plan.Decode != nil && plan.Decode.Note != "" && opt.Notice != nil {
		opt.Notice(plan.Decode.Note)
	}
	var be BoundBackend = cpuBackend{}
	if opt.Backend != nil {
		b, err := opt.Backend.Bind(plan, opt, writesOnly(sink))
		if err != nil {
			return Summary{}, err
		}
		if b == nil {
			opt.Backend = nil // the plan runs on the CPU; Bind gave the notice
		} else {
			be = b
			opt.Window = max(opt.Window, b.Window(opt.Workers))
		}
	}
	if opt.Backend == nil {
		if err := plan.CheckCPU(); err != nil {
			return Summary{}, err
		}
	}
	r := &Runner{
		plan:   plan,
		src:    src,
		sink:   sink,
		opt:    opt,
		report: newReportWriter(opt.Report, plan.String()),
		window: make(chan struct{}, opt.Window),
		order:  make(chan struct{}, ReorderSpan*opt.Window),
		jobs:   make(chan *Item),
		done:   make(chan *Item, opt.Window),
		stop:   make(chan struct{}),
	}
	r.mem = newMemBudget(opt.MemoryBudget)
	r.sum = Summary{Device: opt.Device, Workers: opt.Workers, Pipeline: plan.String()}
	start := time.Now()
	r.ctx, r.cancel = context.WithCancelCause(ctx)
	defer r.cancel(nil)

	var g errgroup.Group
	r.group = &g
	if err := be.Start(r); err != nil {
		_ = be.Finish(&r.sum) // it names the devices in the summary; Start's error is the run's
		r.sum.Phases = r.phases.seconds()
		r.sum.finish(time.Since(start).Seconds())
		if rerr := r.report.summary(r.sum); rerr != nil {
			err = errors.Join(err, fmt.Errorf("report: %w", rerr))
		}
		return r.sum, err
	}
	g.Go(func() error {
		err := r.feed()
		if err != nil {
			r.cancel(err)
		}
		return err
	})
	groups := make(chan []*Item)
	g.Go(func() error {
		defer close(groups)
		r.collect(groups)
		return nil
	})
	g.Go(func() error { return r.reportGroups(ctx, groups) })
	err := g.Wait()

	if berr := be.Finish(&r.sum); berr != nil && err == nil && ctx.Err() == nil {
		err = berr
	}
	r.sum.Phases = r.phases.seconds()
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

// Item is one input on its way through a run.
type Item struct {
	idx     int
	in      Input
	res     Result
	dropped bool // taken from the source but never started (cancelled or stopped)
	// staged is the output a stagingSink wrote, not yet in place: collect commits it
	// before reporting the input.
	staged *stages.Staged
	// outOfWindow says that the item left the window before it was reported: when collect
	// got it with its output staged, or when its backend set it aside (Runner.LeaveWindow);
	// otherwise reportGroups takes it out once it is reported.
	outOfWindow bool
}

// Runner is one run as its backend sees it (BoundBackend.Start): its plan, options and
// channels, and the steps that read, decode, run, store and fail inputs as a CPU run does.
type Runner struct {
	mem    *memBudget // nil when off
	plan   *Plan
	src    Source
	sink   Sink
	opt    Options
	report *reportWriter
	ctx    context.Context // cancelled on interrupt or fatal error
	cancel context.CancelCauseFunc
	group  *errgroup.Group // the run's goroutines (Go)

	window chan struct{} // one token per input in flight (see Options.Window)
	order  chan struct{} // one token per input taken and not yet reported (ReorderSpan)
	jobs   chan *Item
	done   chan *Item

	stop     chan struct{} // closed by StopOnError at the first failure
	stopOnce sync.Once
	mu       sync.Mutex
	failure  *Result // the earliest failure under StopOnError

	sum    Summary // owned by collect
	phases phaseClock
}

func (r *Runner) stopped() bool {
	select {
	case <-r.stop:
		return true
	default:
		return false
	}
}

// feed takes inputs from the source while the reorder span and the window have room.
func (r *Runner) feed() error {
	defer close(r.jobs)
	for idx := 0; ; idx++ {
		for _, sem := range []chan struct{}{r.order, r.window} {
			select {
			case sem <- struct{}{}:
			case <-r.ctx.Done():
				return nil
			case <-r.stop:
				return nil
			}
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
		case r.jobs <- &Item{idx: idx, in: in}:
		case <-r.ctx.Done():
			return nil
		}
	}
}

// fail records a failed input under StopOnError: the run stops taking inputs, and inputs
// after the earliest failure that have not started are dropped. Inputs before it are still
// processed, so the report covers every input up to the failure.
func (r *Runner) fail(it *Item) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.failure == nil || it.idx < r.failure.Index {
		res := it.res
		r.failure = &res
	}
	r.stopOnce.Do(func() { close(r.stop) })
}

// after reports whether StopOnError has stopped the run at an input before idx.
func (r *Runner) after(idx int) bool {
	if !r.stopped() {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return idx > r.failure.Index
}

// collect reorders finished items into input order and hands them to the reporter in
// groups: whatever is next in input order and finished while the reporter was busy goes in
// one group, so that the staged outputs of a group are committed together (one sync for
// all of them), and a slow commit gathers a larger group instead of holding the workers
// up. An item whose output is staged leaves the window as soon as it arrives: it holds
// nothing then but its result and a temporary file; the others leave it once reported, so
// that the window bounds what a sink that keeps images holds. It drains done to the end,
// so that no worker is left blocked.
func (r *Runner) collect(groups chan<- []*Item) {
	pending := map[int]*Item{}
	next := 0
	var ready []*Item // in input order, for the reporter
	done := r.done
	for done != nil || len(ready) > 0 {
		var send chan<- []*Item
		if len(ready) > 0 {
			send = groups
		}
		select {
		case it, ok := <-done:
			if !ok {
				done = nil
				continue
			}
			if it.staged != nil && !it.outOfWindow {
				it.outOfWindow = true
				<-r.window
			}
			pending[it.idx] = it
			for p, ok := pending[next]; ok; p, ok = pending[next] {
				delete(pending, next)
				next++
				ready = append(ready, p)
			}
		case send <- ready:
			ready = nil
		}
	}
}

// reportGroups commits each group's staged outputs and reports its items, in order. After
// a fatal error (the report or the sink failed) it drops what comes, staged outputs
// included, and drains groups to the end.
func (r *Runner) reportGroups(ctx context.Context, groups <-chan []*Item) error {
	var fatal error
	for group := range groups {
		r.commit(group, fatal != nil)
		for _, p := range group {
			if !p.dropped && fatal == nil {
				if fatal = r.emit(ctx, &p.res); fatal != nil {
					r.cancel(fatal) // stop feeding and working; keep draining
				}
			}
			if !p.outOfWindow {
				<-r.window
			}
			<-r.order
		}
	}
	return fatal
}

// commit puts the staged outputs of items in place (stagingSink), failing the inputs
// whose output could not be, or removes them when the run failed (drop) or the item was
// dropped: an output never lands without its report line.
func (r *Runner) commit(items []*Item, drop bool) {
	st, _ := r.sink.(stagingSink)
	var files []stages.Staged
	var owners []*Item
	var gone []stages.Staged
	for _, it := range items {
		switch {
		case it.staged == nil:
		case drop || it.dropped:
			gone = append(gone, *it.staged)
		default:
			files = append(files, *it.staged)
			owners = append(owners, it)
		}
		it.staged = nil
	}
	if len(gone) > 0 {
		st.discard(gone)
	}
	if len(files) == 0 {
		return
	}
	t0 := time.Now()
	for i, err := range st.commit(files) {
		if err != nil {
			it := owners[i]
			failWith(&it.res, r.plan.Save.Def.Name, pathless(err))
			it.res.Output = ""
			if r.opt.StopOnError {
				r.fail(it)
			}
		}
	}
	r.phases.write.Add(int64(time.Since(t0)))
}

func (r *Runner) emit(ctx context.Context, res *Result) error {
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
func (r *Runner) settle(it *Item) bool {
	in := it.in
	res := &it.res
	*res = Result{Index: it.idx, Input: in.Name, Size: in.Size, ModTime: in.ModTime}
	switch {
	case in.Err != nil:
		res.Status = StatusFailed
		res.Err = in.Err
		return true
	case in.Previous != nil:
		p := in.Previous
		res.Status = StatusSkipped
		res.Output, res.Width, res.Height = p.output(), p.Width, p.Height
		res.Decoder, res.Encoder, res.DecodeScale = p.Decoder, p.Encoder, p.DecodeScale
		res.Shape, res.Reductions = p.shape(), p.reductions()
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
	var se *StageError
	if !errors.As(err, &se) { // a later stage's refusal (Plan.Check) names that stage
		se = &StageError{Stage: stage, Err: err}
	}
	res.Err = se
}

// store hands res.Image, the final image, to the sink, which saves it when the chain has
// a save stage, and sets the result's status. The sink may drop res.Image (ToFolder does)
// or keep it. enc, when not nil, replaces the save stage's encoder for this output (a GPU
// run's: encodedBy, deviceJPEG); the sink writes atomically with either.
func (r *Runner) store(it *Item, track string, enc *Encoder) {
	res := &it.res
	stage := "sink"
	if r.plan.Save != nil {
		if enc == nil {
			enc = r.plan.Save.Encoder
		}
		stage = r.plan.Save.Def.Name
		res.Output = outputName(it.in, r.plan.Save.Ext)
	}
	t0 := time.Now()
	var encTime time.Duration
	timed := enc
	if enc != nil {
		timed = r.phases.timedEncoder(enc, &encTime)
	}
	var err error
	if st, ok := r.sink.(stagingSink); ok && enc != nil {
		var staged stages.Staged
		if staged, err = st.stage(r.ctx, res, timed); err == nil {
			it.staged = &staged // collect commits it
		}
	} else {
		err = r.sink.Write(r.ctx, res, timed)
	}
	r.phases.write.Add(int64(time.Since(t0) - encTime))
	if enc != nil {
		r.span(track, stage, it.in.Name, t0)
	}
	if err != nil {
		failWith(res, stage, pathless(err))
		res.Output = ""
		return
	}
	if enc != nil {
		res.Encoder = enc.Name
	}
	res.Status = StatusOK
}

func (r *Runner) span(track, stage, input string, start time.Time) {
	if r.opt.Trace != nil {
		r.opt.Trace.Span(track, stage, start, time.Since(start), map[string]any{"input": input})
	}
}
