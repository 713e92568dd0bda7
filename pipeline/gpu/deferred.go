package gpu

import (
	"sync/atomic"
	"time"
)

// Starting a GPU is not free: the driver takes a few tenths of a second to open it, and
// about as long again to tear it down when the process exits, whether the run used it or
// not. A run that the CPU finishes sooner is slower with the GPU than without. So under
// Options.Optional (--device auto), a run that knows how many inputs it has
// (Options.Inputs) runs on the CPU first and starts its devices only once the CPU's own
// pace says that it would still need longer than gpuStartCost for the inputs not taken
// yet (worthStarting). A small folder then never touches the driver.

// gpuStartCost is what starting the GPU costs a run that the CPU could finish alone: the
// executors' start and the driver's teardown at exit, about the CPU's work left where a
// folder of photo thumbnails broke even (figures in
// bench/results/2026-12-07-code-comments.md).
const gpuStartCost = 500 * time.Millisecond

// paceTick is how often a run that has not started its devices looks at its pace again.
const paceTick = 2 * time.Millisecond

// pace is what the CPU did in a GPU run whose devices have not started: the inputs the
// decode workers took from the source, and those they finished.
type pace struct{ taken, done atomic.Int64 }

// worthStarting reports whether the CPU alone would still need longer than gpuStartCost
// for the inputs not taken yet: total inputs, taken of them and done, elapsed since the
// first was taken, on workers. The workers are busy from the start, so the inputs done in
// elapsed are their pace; until each worker has done one, an input is taken to cost the
// whole elapsed time (a lower bound), so that a few quick inputs first do not hide slow
// ones. More taken than counted (files added since) makes the count worthless: then it is
// worth it, as for a run that did not count.
func worthStarting(total, taken, done int64, elapsed time.Duration, workers int) bool {
	left := total - taken
	switch {
	case left < 0:
		return true
	case left == 0:
		return false
	}
	return time.Duration(left)*elapsed/time.Duration(max(done, int64(workers))) > gpuStartCost
}

// awaitWorth waits until the run's devices are worth starting (worthStarting), reporting
// true, or until the decode workers are done (drained) or the run ended, reporting false.
// The pace's clock starts when the first input is taken: the time the process takes to
// get there is no input's.
func (b *gpuBackend) awaitWorth(drained <-chan struct{}) bool {
	r, p := b.r, &b.pace
	var start time.Time
	tick := time.NewTicker(paceTick)
	defer tick.Stop()
	for {
		select {
		case <-drained:
			return false
		case <-r.Context().Done():
			return false
		case <-tick.C:
		}
		taken := p.taken.Load()
		switch {
		case taken == 0:
			continue
		case start.IsZero():
			start = time.Now()
		}
		if worthStarting(int64(b.run.inputs), taken, p.done.Load(), time.Since(start), r.Options().Workers) {
			return true
		}
	}
}
