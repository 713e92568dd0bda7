package sched

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/imgpipe/imgpipe/stages"
	"github.com/imgpipe/imgpipe/stages/jpegturbo"
)

// Reservation is room for one image in a slot: its pixels (Reserve) or its
// file (ReserveFile).
type Reservation struct {
	e     *Executor
	s     *slot
	gen   uint64
	tag   any
	img   *stages.Image // Reserve's pixels, nil for a file
	file  *fileRoom     // ReserveFile's file, nil for pixels
	lay   imgLayout
	state int // resPending, resCommitted, resAborted
}

// fileRoom is a file's place in a slot: its bytes in the page-locked input,
// and how the device decodes it.
type fileRoom struct {
	File
	data   []byte // the file's bytes in the page-locked input
	decOff int    // offset of the decoded image among the batch's decoded images
}

const (
	resPending = iota
	resCommitted
	resAborted
)

// request is what Reserve and ReserveFile ask of a slot.
type request struct {
	shapes   []Shape
	dims     []int // an array's axes (ReserveArray), nil for an image
	need     []int // per area, see chain.plan
	hostNeed int   // page-locked input bytes
	file     *fileRoom
	tag      any
}

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
	if e.chain.array {
		return nil, fmt.Errorf("reserve: %q takes arrays (ReserveArray)", SegmentString(e.cfg.Ops))
	}
	in := Shape{W: w, H: h, C: c}
	if err := CheckShape(in); err != nil {
		return nil, fmt.Errorf("reserve: %w", err)
	}
	if n := min(e.cfg.SlotBytes, e.cfg.hostIn()); in.Bytes() > n {
		return nil, fmt.Errorf("%w: %dx%dx%d needs %d bytes, a slot holds %d", ErrTooLarge, w, h, c, in.Bytes(), n)
	}
	req, err := e.request(in, tag)
	if err != nil {
		return nil, err
	}
	req.hostNeed = req.need[0]
	return e.reserve(ctx, req)
}

// ReserveFile takes room for the encoded file f that the device decodes
// (FileDecoder) into an RGB image of shape f.Shape, as Reserve does for
// pixels: Bytes is where the caller writes the file, then Commit (or Abort).
// The slot's page-locked input holds the file's bytes and its device input the
// decoded image, each accounted on its own: only the file crosses the link. A
// file or image that cannot fit in an empty slot gives ErrTooLarge at once:
// decode it on the CPU instead.
//
// The image's Result carries Decoder, and Err instead of an image when the
// device could not decode the file; the rest of its batch is unaffected.
func (e *Executor) ReserveFile(ctx context.Context, f File, tag any) (*Reservation, error) {
	if _, err := FileDecoderOf(e.dev); err != nil {
		return nil, fmt.Errorf("reserve file: %w", err)
	}
	if e.chain.array {
		return nil, fmt.Errorf("reserve file: %q takes arrays", SegmentString(e.cfg.Ops))
	}
	if e.chain.nImg == 0 {
		// The decoded image would stay on the device: no op returns it.
		return nil, fmt.Errorf("reserve file: %q makes no image to return a decoded file in", SegmentString(e.cfg.Ops))
	}
	out := f.Shape
	switch err := CheckShape(out); {
	case err != nil:
		return nil, fmt.Errorf("reserve file: %w", err)
	case out.C != 3:
		return nil, fmt.Errorf("reserve file: a decoded image has 3 channels, not %d", out.C)
	case f.Orient < 1 || f.Orient > 8:
		return nil, fmt.Errorf("reserve file: orientation %d, want 1 to 8", f.Orient)
	case f.Scale != 0 && !jpegturbo.ValidDenom(f.Scale):
		return nil, fmt.Errorf("reserve file: DCT scale 1/%d, want one of 1/%v", f.Scale, jpegturbo.ScaleDenoms)
	case f.Decoder == "":
		return nil, errors.New("reserve file: no decoder named")
	case f.Size < 1:
		return nil, fmt.Errorf("reserve file: a file of %d bytes", f.Size)
	case f.Size > e.cfg.hostIn() || out.Bytes() > e.cfg.SlotBytes:
		return nil, fmt.Errorf("%w: a %d-byte file decoding to %v, a slot holds %d file bytes and %d decoded bytes",
			ErrTooLarge, f.Size, out, e.cfg.hostIn(), e.cfg.SlotBytes)
	}
	req, err := e.request(out, tag)
	if err != nil {
		return nil, err
	}
	req.hostNeed = AlignUp(f.Size)
	req.file = &fileRoom{File: f}
	return e.reserve(ctx, req)
}

// request plans an image of input shape in through the segment, refusing one
// that cannot fit in an empty slot.
func (e *Executor) request(in Shape, tag any) (request, error) {
	shapes, need := e.chain.plan(in)
	if !e.chain.fits(make([]int, len(need)), need) {
		return request{}, fmt.Errorf("%w: %v through %q needs more than a slot's buffers (%d bytes, %d of page-locked output)",
			ErrTooLarge, in, SegmentString(e.cfg.Ops), e.cfg.SlotBytes, e.cfg.hostOut())
	}
	return request{shapes: shapes, need: need, tag: tag}, nil
}

// fitsLocked reports whether req fits in the open slot s.
func (e *Executor) fitsLocked(s *slot, req request) bool {
	return len(s.res) < e.cfg.Batch && e.chain.fits(s.used, req.need) &&
		s.rawUsed+s.fileUsed+req.hostNeed <= e.cfg.hostIn()
}

// reserve places req in the open slot, or in a free one (blocking while none
// is free).
func (e *Executor) reserve(ctx context.Context, req request) (*Reservation, error) {
	for {
		e.mu.Lock()
		if e.inputClosed {
			err := e.closedErrLocked()
			e.mu.Unlock()
			return nil, err
		}
		if s := e.open; s != nil {
			if e.fitsLocked(s, req) {
				r := e.addLocked(s, req)
				e.mu.Unlock()
				return r, nil
			}
			e.sealLocked(s)
		}
		if e.cfg.Room != nil {
			r, err := e.tryFreeLocked(req)
			e.mu.Unlock()
			return r, err
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
			r := e.addLocked(s, req)
			e.mu.Unlock()
			return r, nil
		}
		e.toFree(s) // another Reserve opened a slot meanwhile
		e.mu.Unlock()
	}
}

// tryFreeLocked places req in a free slot if there is one, without waiting
// (Config.Room).
func (e *Executor) tryFreeLocked(req request) (*Reservation, error) {
	select {
	case s := <-e.free:
		e.openLocked(s)
		return e.addLocked(s, req), nil
	default:
		return nil, ErrNoRoom
	}
}

// toFree puts s on the free list, which has room for every slot, and tells
// Config.Room.
func (e *Executor) toFree(s *slot) {
	e.free <- s
	if e.cfg.Room != nil {
		e.cfg.Room()
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

func (e *Executor) addLocked(s *slot, req request) *Reservation {
	offs := make([]int, len(req.need))
	copy(offs, s.used)
	for i, n := range req.need {
		s.used[i] += n
	}
	r := &Reservation{e: e, s: s, gen: s.gen, tag: req.tag, lay: imgLayout{shapes: req.shapes, offs: offs, dims: req.dims}}
	if f := req.file; f != nil {
		// The file's bytes go at the end of the page-locked input; its decoded
		// image after the raw images on the device, placed at submit (offs[0]
		// then), once the raw images' extent is known.
		size := f.Size
		s.fileUsed += req.hostNeed
		at := e.cfg.hostIn() - s.fileUsed
		f.data = s.in[at : at+size : at+size]
		f.decOff = s.used[0] - req.need[0] - s.rawUsed
		r.file = f
	} else {
		in := req.shapes[0]
		offs[0] = s.rawUsed
		s.rawUsed += req.hostNeed
		r.img = &stages.Image{W: in.W, H: in.H, C: in.C, Stride: in.W * in.C,
			Pix: s.in[offs[0] : offs[0]+in.Bytes() : offs[0]+in.Bytes()]}
	}
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
	s.rawUsed, s.fileUsed = 0, 0
	s.pending, s.sealed, s.held, s.abandoned = 0, false, 0, false
	s.live, s.layouts = s.live[:0], s.layouts[:0]
	s.gen++ // reservations of the last batch no longer match
	e.toFree(s)
}

// Image is where the caller writes the image's pixels (tightly packed, in
// page-locked memory); nil for a file (ReserveFile). It must not be used
// after Commit or Abort.
func (r *Reservation) Image() *stages.Image { return r.img }

// Bytes is where the caller writes the file of a ReserveFile, exactly its
// size, in page-locked memory; nil for pixels (Reserve). It must not be used
// after Commit or Abort.
func (r *Reservation) Bytes() []byte {
	if r.file == nil {
		return nil
	}
	return r.file.data
}

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
