package pipeline

import (
	"sync/atomic"
	"time"
)

// Starting a GPU is not free: the driver takes a few tenths of a second to open it, and
// about as long again to tear it down when the process exits, whether the run used it or
// not. A run that the CPU finishes sooner is slower with the GPU than without. So under
// GPUOptions.Optional (--device auto), a run that knows how many inputs it has
// (GPUOptions.Inputs) runs on the CPU first and starts its devices only once the CPU's own
// pace says that it would still need longer than gpuStartCost for the inputs not taken
// yet (worthStarting). A small folder then never touches the driver.

// gpuStartCost is what starting the GPU costs a run that the CPU could finish alone. On an
// H200 host the executors were up 0.26-0.40 s after the process started, and the driver's
// teardown added about 0.17 s at exit; a folder of photo thumbnails broke even at about
// 600 photos (0.52 s on the CPU alone, 0.51-0.54 s with the GPU), where the CPU had about
// half a second of work left once it knew its pace.
const gpuStartCost = 500 * time.Millisecond

// paceTick is how often a run that has not started its devices looks at its pace again.
const paceTick = 2 * time.Millisecond

// pace is what the CPU did in a GPU run whose devices have not started: the inputs the
// decode workers took from the source, and those they finished with the time it took them.
type pace struct {
	taken, done atomic.Int64
	busy        atomic.Int64 // nanoseconds
}

// finished records an input that the CPU took d to run.
func (p *pace) finished(d time.Duration) {
	p.done.Add(1)
	p.busy.Add(int64(d))
}

// worthStarting reports whether the CPU alone would still need longer than gpuStartCost
// for the inputs not taken yet: total inputs, taken of them, and done in busy of worker
// time, elapsed into the run, on workers. Until an input is done, each is taken to cost
// the whole elapsed time, a lower bound. More taken than counted (files added since) makes
// the count worthless: then it is worth it, as for a run that did not count.
func worthStarting(total, taken, done int64, busy, elapsed time.Duration, workers int) bool {
	left := total - taken
	switch {
	case left < 0:
		return true
	case left == 0:
		return false
	}
	per := elapsed
	if done > 0 {
		per = busy / time.Duration(done)
	}
	return time.Duration(left)*per/time.Duration(workers) > gpuStartCost
}

// awaitWorth waits until the run's devices are worth starting (worthStarting), reporting
// true, or until the decode workers are done (drained) or the run ended, reporting false.
func (b *gpuBackend) awaitWorth(drained <-chan struct{}) bool {
	r, p := b.r, &b.pace
	start := time.Now()
	tick := time.NewTicker(paceTick)
	defer tick.Stop()
	for {
		select {
		case <-drained:
			return false
		case <-r.ctx.Done():
			return false
		case <-tick.C:
		}
		if worthStarting(int64(b.run.inputs), p.taken.Load(), p.done.Load(), time.Duration(p.busy.Load()), time.Since(start), r.opt.Workers) {
			return true
		}
	}
}
