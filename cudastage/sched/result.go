package sched

import (
	"sync/atomic"

	"github.com/imgpipe/imgpipe/stages"
)

// Result is one image's output. Image and Encoded point into the slot's
// page-locked output memory and are valid until Release; Hist is in Go memory
// and stays valid.
type Result struct {
	Tag   any           // as given to Reserve or ReserveFile
	In    Shape         // the input image's shape (for a file: decoded and oriented)
	Image *stages.Image // the segment's output image; nil with Encoded or Err
	// Encoded is the file the segment's encoding last op wrote (Op.Encode),
	// exactly its length; it replaces Image.
	Encoded []byte
	Hist    *[256]uint64 // the last histogram op's counts, nil when the segment has none or with Err
	// Values are an array's reduction values (Op.Reduce), one per reduction
	// in op order; nil when the segment has none, or with Err.
	Values []float32
	// Decoder names the device decoder of a file (ReserveFile), "" for pixels.
	Decoder string
	// Err is set, and no output given, when the device could not decode the
	// image's file, or its encoder gave a length outside its bound; the
	// batch's other images are unaffected.
	Err error

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
