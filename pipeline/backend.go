package pipeline

import (
	"context"
	"time"

	"github.com/imgpipe/imgpipe/stages"
	"github.com/imgpipe/imgpipe/stages/npy"
)

// A backend is where a run's work happens: CPU workers that each run the whole chain on one
// input (the default), or another backend that Options.Backend names, such as package
// pipeline/gpu's decode and save workers around device executors. A backend takes the
// run's jobs (Runner.Jobs) and hands every one of them on (Runner.Done), then says it is
// done (Runner.CloseDone); the Runner gives it the run's steps, so that every input is
// read, decoded, failed, stored and reported as on the CPU.

// Backend runs a run's pixel stages elsewhere than on the CPU workers (Options.Backend).
type Backend interface {
	// Bind checks the backend against plan for a run with opt, whose sink only writes its
	// outputs when writesOnly, and sizes it; it returns nil and no error, after telling
	// opt.Notice why, when the plan runs wholly on the CPU instead.
	Bind(plan *Plan, opt Options, writesOnly bool) (BoundBackend, error)
}

// BoundBackend is a Backend bound to one run (Backend.Bind).
type BoundBackend interface {
	// Window is the fewest inputs in flight that keep the backend busy with workers workers.
	Window(workers int) int
	// Start starts the backend's goroutines (Runner.Go); an error means that none was.
	Start(r *Runner) error
	// Finish runs once every goroutine ended, or Start failed: it releases what the backend
	// holds and puts its figures into sum; its error is a fault of its own.
	Finish(sum *Summary) error
}

// Plan is the run's plan.
func (r *Runner) Plan() *Plan { return r.plan }

// Options are the run's options, with their defaults filled in.
func (r *Runner) Options() Options { return r.opt }

// Context is cancelled when the run is interrupted or fails (Cancel).
func (r *Runner) Context() context.Context { return r.ctx }

// Cancel ends the run with err, a fatal error.
func (r *Runner) Cancel(err error) { r.cancel(err) }

// Go runs f in the run's group: the run waits for it, and an error of f is the run's.
func (r *Runner) Go(f func() error) { r.group.Go(f) }

// Jobs is the run's inputs, in input order, closed once the source is drained.
func (r *Runner) Jobs() <-chan *Item { return r.jobs }

// Done hands an input on to be reported, recording its failure first under StopOnError.
func (r *Runner) Done(it *Item) {
	if !it.dropped && it.res.Status == StatusFailed && r.opt.StopOnError {
		r.fail(it)
	}
	r.done <- it
}

// CloseDone says that every input was handed on (Done): the backend's last call.
func (r *Runner) CloseDone() { close(r.done) }

// Ended reports whether it is no longer to be processed: the run was cancelled, or stopped
// at an earlier input.
func (r *Runner) Ended(it *Item) bool { return r.ctx.Err() != nil || r.after(it.idx) }

// Settle finishes an input that needs no work (the source failed it, or an earlier run did
// it), reporting whether it did.
func (r *Runner) Settle(it *Item) bool { return r.settle(it) }

// Process runs the whole chain on one input on the CPU, as a CPU run does.
func (r *Runner) Process(it *Item, w *Worker) { r.process(it, w) }

// CPUChain runs the pixel stages on img, decoded into w's memory, on the CPU, and stores
// the result.
func (r *Runner) CPUChain(it *Item, w *Worker, img *stages.Image) { r.cpuChain(it, w, img, true) }

// DecodeInto decodes an input into memory from alloc, charging the memory budget for it
// first; release gives the charge back (nil when err is not).
func (r *Runner) DecodeInto(in Input, alloc stages.Alloc) (img *stages.Image, decoder Decoded, release func(), err error) {
	return r.decodeInto(in, alloc)
}

// Load reads an input's encoded bytes with the memory budget charged for decoding them.
func (r *Runner) Load(in Input) (Loaded, error) { return r.load(in) }

// DecodeLoaded decodes f into memory from alloc, taking over its charge (see DecodeInto).
func (r *Runner) DecodeLoaded(f Loaded, alloc stages.Alloc) (img *stages.Image, decoder Decoded, release func(), err error) {
	return r.decodeLoaded(f, alloc)
}

// ReadArray reads an input's array for the load stage; ok is false when the input failed
// or was dropped, else release gives back the memory charged for it.
func (r *Runner) ReadArray(it *Item, w *Worker) (a *npy.Array, release func(), ok bool) {
	return r.readArray(it, w)
}

// CPUArrayChain runs the array stages on a on the CPU and stores the result.
func (r *Runner) CPUArrayChain(it *Item, w *Worker, a *npy.Array) { r.cpuArrayChain(it, w, a) }

// StoreArray hands an array chain's result a to the sink.
func (r *Runner) StoreArray(it *Item, track string, a *npy.Array) { r.storeArray(it, track, a) }

// Store hands the result's image to the sink and sets its status; enc, when not nil,
// replaces the save stage's encoder for this output.
func (r *Runner) Store(it *Item, track string, enc *Encoder) { r.store(it, track, enc) }

// Span records a stage's span for an input on a trace track, when the run traces.
func (r *Runner) Span(track, stage, input string, start time.Time) {
	r.span(track, stage, input, start)
}

// LeaveWindow takes an input out of the window while it waits, holding no memory, for the
// backend to take it up again.
func (r *Runner) LeaveWindow(it *Item) {
	it.outOfWindow = true
	<-r.window
}

// Index is the input's place in input order.
func (it *Item) Index() int { return it.idx }

// Input is the input as the source gave it.
func (it *Item) Input() Input { return it.in }

// Result is the input's result, which the backend fills in.
func (it *Item) Result() *Result { return &it.res }

// Drop marks the input as not done: the run ended before it was.
func (it *Item) Drop() { it.dropped = true }

// Dropped reports whether the input was marked as not done (Drop).
func (it *Item) Dropped() bool { return it.dropped }

// OutOfWindow reports whether the input left the window before it was done (LeaveWindow).
func (it *Item) OutOfWindow() bool { return it.outOfWindow }

// Fail records the input's failure in stage.
func (it *Item) Fail(stage string, err error) { failWith(&it.res, stage, err) }

// NewWorker returns a worker's own state, for the goroutine whose trace track is track.
func NewWorker(track string) *Worker { return &Worker{track: track} }

// Track is the worker's trace track.
func (w *Worker) Track() string { return w.track }

// Image returns a w×h×c image from the worker's recycled buffers, its pixels not zeroed.
func (w *Worker) Image(width, height, c int) *stages.Image { return w.bufs.get(width, height, c) }

// Data is the whole file, or nil for one that is decoded as a stream.
func (f Loaded) Data() []byte { return f.data }
