package sched

import (
	"sync/atomic"

	"github.com/imgpipe/imgpipe/stages"
)

// Result is one image's output. Image points into the slot's page-locked
// output memory and is valid until Release; Hist is in Go memory and stays
// valid.
type Result struct {
	Tag   any           // as given to Reserve
	In    Shape         // the input image's shape
	Image *stages.Image // the segment's output image
	Hist  *[256]uint64  // the last histogram op's counts, nil when the segment has none

	e        *Executor
	s        *slot
	released atomic.Bool
}

// Results delivers one Result per committed image, batch by batch. It is
// closed when the executor finished or stopped. Every Result must be
// released, or its slot is never reused.
func (e *Executor) Results() <-chan *Result { return e.results }

// Release gives the result's slot memory back. Image must not be used after.
// Releasing twice is harmless.
func (r *Result) Release() {
	if !r.released.CompareAndSwap(false, true) {
		return
	}
	e, s := r.e, r.s
	e.mu.Lock()
	s.held--
	if s.held > 0 {
		e.mu.Unlock()
		return
	}
	if s.freeMem {
		s.freeMem = false
		e.mu.Unlock()
		_ = e.onDeviceThread(func() error { return e.freeSlot(s) })
		return
	}
	e.recycleLocked(s)
	e.mu.Unlock()
}
