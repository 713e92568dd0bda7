package sched

import (
	"context"
	"fmt"
	"time"

	"github.com/imgpipe/imgpipe/stages"
)

// Reservation is room for one image in a slot.
type Reservation struct {
	e     *Executor
	s     *slot
	gen   uint64
	tag   any
	img   *stages.Image
	lay   imgLayout
	state int // resPending, resCommitted, resAborted
}

const (
	resPending = iota
	resCommitted
	resAborted
)

// Reserve takes room for a w×h image with c channels and returns it, with
// Image pointing into the slot's page-locked input memory. It blocks while no
// slot is free (back-pressure) until ctx is done or the executor stops. An
// image that cannot fit even in an empty slot gives an error wrapping
// ErrTooLarge at once; run it on the CPU instead. tag comes back in the
// image's Result.
//
// Every Reservation must be committed or aborted: its slot cannot be
// submitted, nor the executor finish, before. A caller must never block in
// Reserve while holding Results it has not released and that only it would
// release, or the executor's slots may all wait on it.
func (e *Executor) Reserve(ctx context.Context, w, h, c int, tag any) (*Reservation, error) {
	in := Shape{W: w, H: h, C: c}
	if err := CheckShape(in); err != nil {
		return nil, fmt.Errorf("reserve: %w", err)
	}
	if in.Bytes() > e.cfg.SlotBytes {
		return nil, fmt.Errorf("%w: %dx%dx%d needs %d bytes, a slot holds %d", ErrTooLarge, w, h, c, in.Bytes(), e.cfg.SlotBytes)
	}
	shapes, need := e.chain.plan(in)
	if !e.chain.fits(make([]int, len(need)), need) {
		return nil, fmt.Errorf("%w: %dx%dx%d through %q needs more than the %d bytes of a slot's buffers",
			ErrTooLarge, w, h, c, SegmentString(e.cfg.Ops), e.cfg.SlotBytes)
	}
	for {
		e.mu.Lock()
		if e.inputClosed {
			err := e.closedErrLocked()
			e.mu.Unlock()
			return nil, err
		}
		if s := e.open; s != nil {
			if len(s.res) < e.cfg.Batch && e.chain.fits(s.used, need) {
				r := e.addLocked(s, shapes, need, tag)
				e.mu.Unlock()
				return r, nil
			}
			e.sealLocked(s)
		}
		opened := e.opened
		e.mu.Unlock()

		var s *slot
		select {
		case s = <-e.free:
		case <-opened:
			continue // another Reserve opened a slot: try it
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		case <-e.quit:
			e.mu.Lock()
			err := e.closedErrLocked()
			e.mu.Unlock()
			return nil, err
		}
		e.mu.Lock()
		if e.open == nil && !e.inputClosed {
			e.openLocked(s)
			r := e.addLocked(s, shapes, need, tag)
			e.mu.Unlock()
			return r, nil
		}
		e.free <- s // another Reserve opened a slot meanwhile; free has room for every slot
		e.mu.Unlock()
	}
}

func (e *Executor) closedErrLocked() error {
	if e.err != nil {
		return e.err
	}
	return ErrInputClosed
}

func (e *Executor) openLocked(s *slot) {
	if e.onOpen != nil {
		e.onOpen(s)
	}
	e.open = s
	close(e.opened)
	e.opened = make(chan struct{})
	e.outstanding++
	s.gen++
	if e.cfg.Linger > 0 {
		gen := s.gen
		s.timer = time.AfterFunc(e.cfg.Linger, func() {
			e.mu.Lock()
			defer e.mu.Unlock()
			if e.open == s && s.gen == gen {
				e.sealLocked(s)
			}
		})
	}
}

func (e *Executor) addLocked(s *slot, shapes []Shape, need []int, tag any) *Reservation {
	offs := make([]int, len(need))
	copy(offs, s.used)
	for i, n := range need {
		s.used[i] += n
	}
	in := shapes[0]
	img := &stages.Image{W: in.W, H: in.H, C: in.C, Stride: in.W * in.C}
	img.Pix = s.in[offs[0] : offs[0]+in.Bytes() : offs[0]+in.Bytes()]
	r := &Reservation{e: e, s: s, gen: s.gen, tag: tag, img: img, lay: imgLayout{shapes: shapes, offs: offs}}
	s.res = append(s.res, r)
	s.pending++
	if len(s.res) == e.cfg.Batch {
		e.sealLocked(s)
	}
	return r
}

// sealLocked closes the slot to new reservations, and readies it when no
// reservation is pending.
func (e *Executor) sealLocked(s *slot) {
	if s.sealed {
		return
	}
	s.sealed = true
	if e.open == s {
		e.open = nil
	}
	if s.timer != nil {
		s.timer.Stop()
		s.timer = nil
	}
	if s.pending == 0 {
		e.readyLocked(s)
	}
}

// readyLocked hands a sealed slot with no pending reservation to the
// submitter, or frees it when it holds no committed image or the executor
// stopped.
func (e *Executor) readyLocked(s *slot) {
	e.outstanding--
	live := 0
	for _, r := range s.res {
		if r.state == resCommitted {
			live++
		}
	}
	if live == 0 || e.halted {
		e.recycleLocked(s)
	} else {
		e.ready <- s // ready has room for every slot
	}
	e.maybeCloseReadyLocked()
}

func (e *Executor) maybeCloseReadyLocked() {
	if e.inputClosed && e.outstanding == 0 && !e.readyClosed {
		e.readyClosed = true
		close(e.ready)
	}
}

// recycleLocked returns a slot to the free list.
func (e *Executor) recycleLocked(s *slot) {
	s.res = s.res[:0]
	clear(s.used)
	s.pending, s.sealed, s.held, s.abandoned = 0, false, 0, false
	s.live, s.layouts = s.live[:0], s.layouts[:0]
	s.gen++ // reservations of the last batch no longer match
	e.free <- s
}

// Image is where the caller writes the image's pixels (tightly packed, in
// page-locked memory). It must not be used after Commit or Abort.
func (r *Reservation) Image() *stages.Image { return r.img }

// Commit says the pixels are written: the image goes into its batch.
func (r *Reservation) Commit() { r.finish(resCommitted) }

// Abort drops the image from its batch (its decode failed, say); the rest of
// the batch goes on.
func (r *Reservation) Abort() { r.finish(resAborted) }

func (r *Reservation) finish(state int) {
	e := r.e
	e.mu.Lock()
	defer e.mu.Unlock()
	s := r.s
	if r.state != resPending || s.gen != r.gen {
		return
	}
	r.state = state
	s.pending--
	if s.sealed && s.pending == 0 {
		e.readyLocked(s)
	}
}

// Flush seals the open slot, so that what was reserved goes to the device
// without waiting for more images or the linger time.
func (e *Executor) Flush() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.open != nil {
		e.sealLocked(e.open)
	}
}

// CloseInput says no more images come. The executor finishes the batches it
// has, closes Results, and ends.
func (e *Executor) CloseInput() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.closeInputLocked()
}

func (e *Executor) closeInputLocked() {
	if e.inputClosed {
		return
	}
	e.inputClosed = true
	if e.open != nil {
		e.sealLocked(e.open)
	}
	e.maybeCloseReadyLocked()
}
