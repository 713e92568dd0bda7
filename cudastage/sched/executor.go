package sched

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/imgpipe/imgpipe/stages"
)

// Errors of the executor's API.
var (
	// ErrTooLarge wraps the error for an image that does not fit in an empty
	// slot. The caller should run that image on the CPU path instead.
	ErrTooLarge = errors.New("image too large for a device slot")
	// ErrInputClosed is returned by Reserve after CloseInput.
	ErrInputClosed = errors.New("executor input is closed")
	// ErrClosed is the executor's error when Close stopped it mid-run.
	ErrClosed = errors.New("executor closed")
)

// Defaults and limits of Config.
const (
	DefaultStreams = 4
	DefaultBatch   = 16
	DefaultLinger  = 20 * time.Millisecond
	MaxStreams     = 64
	MaxSlots       = 256
	MaxBatch       = 4096
	MaxSlotBytes   = 1 << 36
)

// DefaultSlotBytes holds batch 1080p RGB frames.
func DefaultSlotBytes(batch int) int { return batch * alignUp(1920*1080*3) }

// Config sets up an Executor.
type Config struct {
	// Ops is the device segment: the pixel ops every image goes through.
	Ops []Op
	// Streams is the number of device streams (default DefaultStreams).
	// With the executor's cross-stream ordering (see Stats), 3 streams are
	// enough to overlap one batch's H2D, the previous one's kernels and the
	// one before's D2H; a 4th absorbs jitter.
	Streams int
	// Slots is the number of batches in flight, from filling to released
	// (default Streams+2: one per stream on the device, one being filled by
	// decode workers, and one held by save workers). Memory is bounded by
	// Slots × the slot size.
	Slots int
	// Batch is the most images a slot takes (default DefaultBatch).
	Batch int
	// SlotBytes is a slot's input capacity in bytes (default
	// DefaultSlotBytes(Batch)). Every buffer of the segment has this
	// capacity, since no op makes more bytes than it reads.
	SlotBytes int
	// Linger seals a partly filled slot this long after it opened, so that a
	// slow or paused input never holds images back (default DefaultLinger;
	// negative: only when full, on Flush or on CloseInput).
	Linger time.Duration
	// MaxHostBytes and MaxDeviceBytes, when positive, refuse a Config whose
	// slots would hold more page-locked or device memory, before allocating.
	MaxHostBytes, MaxDeviceBytes int64
	// Pageable puts the slots' host memory on the Go heap instead of
	// page-locked memory. The device then copies synchronously (after the
	// stream's earlier work), which is the textbook flow: it exists to measure
	// what page-locked memory and overlap gain, not for real runs.
	Pageable bool
	// Trace, when not nil, receives one track per stream with each batch's
	// H2D, kernels and D2H, and a "submit" track.
	Trace Tracer
}

func (c Config) withDefaults(dev Device) (Config, error) {
	if err := checkOps(dev, c.Ops); err != nil {
		return c, err
	}
	if c.Streams == 0 {
		c.Streams = DefaultStreams
	}
	if c.Slots == 0 {
		c.Slots = c.Streams + 2
	}
	if c.Batch == 0 {
		c.Batch = DefaultBatch
	}
	if c.SlotBytes == 0 {
		c.SlotBytes = DefaultSlotBytes(c.Batch)
	}
	if c.Linger == 0 {
		c.Linger = DefaultLinger
	}
	var errs []error
	if c.Streams < 1 || c.Streams > MaxStreams {
		errs = append(errs, fmt.Errorf("streams %d out of range [1, %d]", c.Streams, MaxStreams))
	}
	if c.Slots < 1 || c.Slots > MaxSlots {
		errs = append(errs, fmt.Errorf("slots %d out of range [1, %d]", c.Slots, MaxSlots))
	}
	if c.Batch < 1 || c.Batch > MaxBatch {
		errs = append(errs, fmt.Errorf("batch %d out of range [1, %d]", c.Batch, MaxBatch))
	}
	if c.SlotBytes < Align || c.SlotBytes > MaxSlotBytes {
		errs = append(errs, fmt.Errorf("slot bytes %d out of range [%d, %d]", c.SlotBytes, Align, MaxSlotBytes))
	}
	return c, errors.Join(errs...)
}

// Slot events, in stream order. Each phase's start is recorded after the
// cross-stream wait for the previous batch's phase (see submit).
const (
	evH2DStart = iota
	evH2DEnd
	evKStart
	evOpEnd0 // op j's end is evOpEnd0+j; then D2H start and D2H end
)

// phases lists the (start, end) events of a batch's phases: H2D, each op,
// D2H. Their durations are measured event to event, exactly, rather than as
// differences of times from the base event, which lose precision as a run
// gets long (CUDA gives float32 milliseconds).
func phases(nOps int) [][2]int {
	p := [][2]int{{evH2DStart, evH2DEnd}, {evKStart, evOpEnd0}}
	for j := 1; j < nOps; j++ {
		p = append(p, [2]int{evOpEnd0 + j - 1, evOpEnd0 + j})
	}
	return append(p, [2]int{evOpEnd0 + nOps, evOpEnd0 + nOps + 1})
}

// slot is one batch's memory and events. Its batch fields are guarded by
// Executor.mu while it fills; between submission and delivery only the
// submitter and then the waiter touch it, handing it over by channel.
type slot struct {
	id                 int
	in, out, hist, tab []byte    // page-locked; out nil when no op makes an image
	dev                [2]DevPtr // bufIn, bufMid
	dHist, dTab        DevPtr
	ev                 []Event
	calls              []OpCall
	at                 []time.Duration // event times from the base event
	dur                []time.Duration // phase durations, see phases

	// filling (under Executor.mu)
	gen     uint64
	res     []*Reservation
	used    []int
	pending int
	sealed  bool
	timer   *time.Timer

	// submitted (submitter, then waiter)
	live      []*Reservation
	layouts   []imgLayout
	seq       int64
	stream    int
	abandoned bool
	inBytes   int
	outBytes  int

	// delivered (under Executor.mu)
	held    int
	freeMem bool // Close ran while results were held: free on last release
}

// Executor runs one device segment over a stream of images with Streams
// streams and Slots slots, overlapping the H2D copy of one batch, the kernels
// of the previous one and the D2H copy of the one before.
//
// Life of a slot: Reserve takes room for an image in the open slot (taking a
// free one, and blocking when none is free: back-pressure); the caller writes
// the pixels straight into the page-locked Reservation.Image and calls Commit,
// or Abort if decoding failed. The slot is sealed when it holds Batch images,
// when the next image does not fit, after Linger, on Flush or CloseInput, and
// is submitted once all its reservations were committed or aborted (aborted
// images are just left out: one bad file never fails its batch). On its
// stream it gets one H2D of the used input bytes (and launch tables), one
// launch per op over the whole batch, and one D2H of the outputs and
// histograms. The waiter sees the D2H end, and sends one Result per image on
// Results. When every Result of the slot was released, the slot is free.
//
// Threading: all submission calls run on one goroutine locked to its OS
// thread, and all event waits on another, each bound to the device
// (Device.BindThread), so waiting never holds up submission. Reserve,
// Commit, Abort, Release and the rest are safe from any goroutine.
//
// Errors: a device error is fatal. The executor stops, abandons the batches
// in flight (after the device finished with their memory), closes Results,
// and Wait returns the error. Cancelling the context given to New does the
// same with the context's error. An executor runs on one device; use one per
// device.
type Executor struct {
	dev   Device
	cfg   Config
	chain *chain

	streams  []Stream
	scratch  []DevPtr // per stream
	base     Event
	hostBase time.Time
	tabOff   []int // per op, into a slot's table region
	phases   [][2]int
	tabBytes int
	slots    []*slot

	free     chan *slot
	ready    chan *slot
	inflight chan *slot
	results  chan *Result
	quit     chan struct{}
	finished chan struct{}
	unwatch  func() bool

	trace        Tracer
	streamTracks []string
	submitTrack  string

	mu          sync.Mutex
	open        *slot
	outstanding int // slots open or sealed, not yet handed to the submitter or freed
	inputClosed bool
	readyClosed bool
	halted      bool
	done        bool
	closed      bool
	err         error

	statsMu sync.Mutex
	stats   Stats

	// onOpen, for tests, checks a slot as it is taken for a new batch
	// (called with mu held).
	onOpen func(*slot)
}

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

// New allocates the slots and streams on dev and starts the executor. The
// executor stops when ctx is cancelled. The caller must call Close.
func New(ctx context.Context, dev Device, cfg Config) (*Executor, error) {
	cfg, err := cfg.withDefaults(dev)
	if err != nil {
		return nil, fmt.Errorf("executor: %w", err)
	}
	e := &Executor{
		dev:      dev,
		cfg:      cfg,
		chain:    newChain(cfg.Ops, cfg.SlotBytes),
		phases:   phases(len(cfg.Ops)),
		free:     make(chan *slot, cfg.Slots),
		ready:    make(chan *slot, cfg.Slots),
		inflight: make(chan *slot, cfg.Slots),
		results:  make(chan *Result, cfg.Slots*cfg.Batch),
		quit:     make(chan struct{}),
		finished: make(chan struct{}),
		trace:    cfg.Trace,
	}
	e.stats = Stats{Device: dev.Name(), Streams: cfg.Streams, Slots: cfg.Slots, Batch: cfg.Batch, SlotBytes: cfg.SlotBytes}
	for _, op := range cfg.Ops {
		e.stats.Ops = append(e.stats.Ops, OpTime{Op: op.String()})
	}
	for _, op := range cfg.Ops {
		e.tabOff = append(e.tabOff, e.tabBytes)
		e.tabBytes += alignUp(dev.TableBytes(op, cfg.Batch))
	}
	host, devBytes := e.memory()
	e.stats.HostBytes, e.stats.DeviceBytes = host, devBytes
	if cfg.MaxHostBytes > 0 && host > cfg.MaxHostBytes {
		return nil, fmt.Errorf("executor: %d slots need %d MiB of page-locked memory, over the %d MiB limit",
			cfg.Slots, host>>20, cfg.MaxHostBytes>>20)
	}
	if cfg.MaxDeviceBytes > 0 && devBytes > cfg.MaxDeviceBytes {
		return nil, fmt.Errorf("executor: %d slots need %d MiB of device memory, over the %d MiB limit",
			cfg.Slots, devBytes>>20, cfg.MaxDeviceBytes>>20)
	}
	if err := e.onDeviceThread(e.allocate); err != nil {
		e.onDeviceThread(e.freeAll)
		return nil, fmt.Errorf("executor on %s: %w", dev.Name(), err)
	}
	for i := range e.streams {
		e.streamTracks = append(e.streamTracks, fmt.Sprintf("%s stream %d", dev.Name(), i))
	}
	e.submitTrack = dev.Name() + " submit"
	for _, s := range e.slots {
		e.free <- s
	}
	e.unwatch = context.AfterFunc(ctx, func() { e.stop(context.Cause(ctx)) })
	go e.submitter()
	go e.waiter()
	return e, nil
}

// memory is the page-locked and device memory the slots and streams hold.
func (e *Executor) memory() (host, dev int64) {
	c := e.cfg
	perHost := int64(c.SlotBytes) + int64(e.tabBytes)
	perDev := int64(c.SlotBytes) + int64(e.tabBytes)
	if e.chain.nImg > 0 {
		perHost += int64(c.SlotBytes)
		perDev += int64(c.SlotBytes)
	}
	if e.chain.hasHist {
		perHost += int64(c.Batch) * HistBytes
		perDev += int64(c.Batch) * HistBytes
	}
	host = perHost * int64(c.Slots)
	dev = perDev*int64(c.Slots) + int64(e.scratchBytes())*int64(c.Streams)
	return host, dev
}

func (e *Executor) scratchBytes() int {
	n := 0
	for _, op := range e.cfg.Ops {
		n = max(n, e.dev.ScratchBytes(op, e.cfg.SlotBytes, e.cfg.Batch))
	}
	return n
}

// onDeviceThread runs fn on the calling goroutine locked to its OS thread,
// with the device bound to that thread.
func (e *Executor) onDeviceThread(fn func() error) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := e.dev.BindThread(); err != nil {
		return err
	}
	return fn()
}

func (e *Executor) allocate() error {
	d, c := e.dev, e.cfg
	for range c.Streams {
		s, err := d.NewStream()
		if err != nil {
			return err
		}
		e.streams = append(e.streams, s)
		var p DevPtr
		if n := e.scratchBytes(); n > 0 {
			if p, err = d.DevAlloc(n); err != nil {
				return err
			}
		}
		e.scratch = append(e.scratch, p)
	}
	var err error
	if e.base, err = d.NewEvent(); err != nil {
		return err
	}
	nOps := len(c.Ops)
	for i := range c.Slots {
		s := &slot{id: i, used: make([]int, 1+e.chain.nImg), calls: make([]OpCall, nOps),
			at: make([]time.Duration, evOpEnd0+nOps+2), dur: make([]time.Duration, nOps+2)}
		e.slots = append(e.slots, s)
		for j := range s.calls {
			s.calls[j].Images = make([]OpImage, 0, c.Batch)
		}
		if err := e.allocSlot(s); err != nil {
			return err
		}
	}
	// The base event anchors device times on the host clock: once it has
	// completed, the host's now is (within the wait's latency) its time.
	if err := d.Record(e.base, e.streams[0]); err != nil {
		return err
	}
	if err := d.WaitEvent(e.base); err != nil {
		return err
	}
	e.hostBase = time.Now()
	return nil
}

func (e *Executor) allocSlot(s *slot) error {
	d, c := e.dev, e.cfg
	var err error
	if s.in, err = e.hostAlloc(c.SlotBytes); err != nil {
		return err
	}
	if s.dev[bufIn], err = d.DevAlloc(c.SlotBytes); err != nil {
		return err
	}
	if e.chain.nImg > 0 {
		if s.out, err = e.hostAlloc(c.SlotBytes); err != nil {
			return err
		}
		if s.dev[bufMid], err = d.DevAlloc(c.SlotBytes); err != nil {
			return err
		}
	}
	if e.chain.hasHist {
		if s.hist, err = e.hostAlloc(c.Batch * HistBytes); err != nil {
			return err
		}
		if s.dHist, err = d.DevAlloc(c.Batch * HistBytes); err != nil {
			return err
		}
	}
	if e.tabBytes > 0 {
		if s.tab, err = e.hostAlloc(e.tabBytes); err != nil {
			return err
		}
		if s.dTab, err = d.DevAlloc(e.tabBytes); err != nil {
			return err
		}
	}
	for range evOpEnd0 + len(c.Ops) + 2 {
		ev, err := d.NewEvent()
		if err != nil {
			return err
		}
		s.ev = append(s.ev, ev)
	}
	return nil
}

// hostAlloc returns host memory for a slot: page-locked unless Pageable.
func (e *Executor) hostAlloc(n int) ([]byte, error) {
	if e.cfg.Pageable {
		return make([]byte, n), nil
	}
	return e.dev.HostAlloc(n)
}

// freeSlot releases a slot's memory and events, keeping the first error.
func (e *Executor) freeSlot(s *slot) error {
	d := e.dev
	var errs []error
	for _, b := range [][]byte{s.in, s.out, s.hist, s.tab} {
		if b != nil && !e.cfg.Pageable {
			errs = append(errs, d.HostFree(b))
		}
	}
	for _, p := range []DevPtr{s.dev[bufIn], s.dev[bufMid], s.dHist, s.dTab} {
		if p != 0 {
			errs = append(errs, d.DevFree(p))
		}
	}
	for _, ev := range s.ev {
		errs = append(errs, d.DestroyEvent(ev))
	}
	s.in, s.out, s.hist, s.tab, s.ev = nil, nil, nil, nil, nil
	s.dev, s.dHist, s.dTab = [2]DevPtr{}, 0, 0
	return errors.Join(errs...)
}

// freeAll releases everything New allocated, except slots whose results are
// still held (they are freed on their last Release).
func (e *Executor) freeAll() error {
	var errs []error
	e.mu.Lock()
	var slots []*slot
	for _, s := range e.slots {
		if s.held > 0 {
			s.freeMem = true
		} else {
			slots = append(slots, s)
		}
	}
	e.mu.Unlock()
	for _, s := range slots {
		errs = append(errs, e.freeSlot(s))
	}
	for _, p := range e.scratch {
		if p != 0 {
			errs = append(errs, e.dev.DevFree(p))
		}
	}
	if e.base != 0 {
		errs = append(errs, e.dev.DestroyEvent(e.base))
	}
	for _, s := range e.streams {
		errs = append(errs, e.dev.DestroyStream(s))
	}
	e.scratch, e.streams, e.base = nil, nil, 0
	return errors.Join(errs...)
}

// Results delivers one Result per committed image, batch by batch. It is
// closed when the executor finished or stopped. Every Result must be
// released, or its slot is never reused.
func (e *Executor) Results() <-chan *Result { return e.results }

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
	if err := checkShape(in); err != nil {
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
		e.mu.Unlock()

		var s *slot
		select {
		case s = <-e.free:
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

// Decode decodes data with stages.Decode straight into a reservation, then
// commits it, or aborts it and returns the decode error. A file too large for
// a slot gives an error wrapping ErrTooLarge (nothing decoded: decode it for
// the CPU path instead).
func (e *Executor) Decode(ctx context.Context, data []byte, opt stages.DecodeOptions, tag any) error {
	var r *Reservation
	var allocErr error
	_, err := stages.Decode(data, opt, func(w, h, c int) (*stages.Image, error) {
		if r != nil {
			return nil, errors.New("decoder asked for a second image")
		}
		r, allocErr = e.Reserve(ctx, w, h, c, tag)
		if allocErr != nil {
			return nil, allocErr
		}
		return r.Image(), nil
	})
	switch {
	case allocErr != nil:
		return allocErr
	case err != nil:
		if r != nil {
			r.Abort()
		}
		return err
	case r == nil:
		return errors.New("decoder returned an image without allocating it")
	}
	r.Commit()
	return nil
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

// stop halts the executor with err unless it already finished or stopped.
func (e *Executor) stop(err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.halted || e.done {
		return
	}
	e.halted = true
	e.err = err
	close(e.quit)
	e.closeInputLocked()
}

func (e *Executor) isHalted() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.halted
}

// Wait blocks until the executor finished (after CloseInput) or stopped, and
// every goroutine it started ended. It returns nil, the fatal device error,
// or the context's error.
func (e *Executor) Wait() error {
	<-e.finished
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.err
}

// Close stops the executor if it still runs (abandoning its batches), waits
// for it, drains undelivered Results, and frees its memory. Memory of slots
// whose Results are still held is freed on their last Release. Close blocks
// while Reservations are pending.
func (e *Executor) Close() error {
	e.stop(ErrClosed)
	<-e.finished
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil
	}
	e.closed = true
	e.mu.Unlock()
	for r := range e.results {
		r.Release()
	}
	return e.onDeviceThread(e.freeAll)
}

// Stats returns the totals so far.
func (e *Executor) Stats() Stats {
	e.statsMu.Lock()
	defer e.statsMu.Unlock()
	s := e.stats
	s.Ops = append([]OpTime(nil), e.stats.Ops...)
	return s
}

// ResetStats zeroes the batch totals (after a warm-up, say).
func (e *Executor) ResetStats() {
	e.statsMu.Lock()
	defer e.statsMu.Unlock()
	s := &e.stats
	*s = Stats{Device: s.Device, Streams: s.Streams, Slots: s.Slots, Batch: s.Batch, SlotBytes: s.SlotBytes,
		HostBytes: s.HostBytes, DeviceBytes: s.DeviceBytes, Ops: s.Ops}
	for i := range s.Ops {
		s.Ops[i].Total = 0
	}
}

// submitter enqueues ready slots on the streams, round robin.
func (e *Executor) submitter() {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	defer close(e.inflight)
	if err := e.dev.BindThread(); err != nil {
		e.stop(fmt.Errorf("%s: %w", e.dev.Name(), err))
	}
	var prev *slot
	var seq int64
	for s := range e.ready {
		if e.isHalted() {
			e.mu.Lock()
			e.recycleLocked(s)
			e.mu.Unlock()
			continue
		}
		t0 := time.Now()
		if err := e.submit(s, prev, seq); err != nil {
			e.stop(fmt.Errorf("%s: batch %d: %w", e.dev.Name(), seq, err))
			s.abandoned = true
		}
		if e.trace != nil {
			e.trace.Span(e.submitTrack, "submit", t0, time.Since(t0), map[string]any{"batch": seq, "images": len(s.live)})
		}
		e.inflight <- s // inflight has room for every slot
		prev = s
		seq++
	}
}

// submit enqueues one batch: [wait prev H2D] H2D [wait prev kernels] ops
// [wait prev D2H] D2H, with events around each phase. The waits order the
// phases of consecutive batches across streams, so each engine works on one
// batch at a time in order and the events time real work (see Stats).
func (e *Executor) submit(s *slot, prev *slot, seq int64) error {
	d, c := e.dev, e.chain
	s.seq = seq
	s.stream = int(seq % int64(len(e.streams)))
	st := e.streams[s.stream]
	s.live, s.layouts = s.live[:0], s.layouts[:0]
	e.mu.Lock()
	for _, r := range s.res {
		if r.state == resCommitted {
			s.live = append(s.live, r)
			s.layouts = append(s.layouts, r.lay)
		}
	}
	s.inBytes = s.used[0]
	e.mu.Unlock()
	c.fillCalls(s.calls, s.layouts, s.dev, s.dHist)
	s.outBytes = 0
	if fb := c.finalBuf(); fb >= 0 {
		s.outBytes = s.used[len(s.used)-1]
	}
	for j := range s.calls {
		call := &s.calls[j]
		call.Scratch = e.scratch[s.stream]
		call.Table, call.TableOff = s.dTab, e.tabOff[j]
		if n := d.TableBytes(call.Op, len(s.live)); n > 0 {
			if e.tabOff[j]+n > len(s.tab) {
				return fmt.Errorf("%s table of %d bytes overflows its %d-byte region", call.Op, n, len(s.tab)-e.tabOff[j])
			}
			if err := d.EncodeTable(call, s.tab[e.tabOff[j]:e.tabOff[j]+n]); err != nil {
				return err
			}
		}
	}
	cross := prev != nil && prev.stream != s.stream
	nOps := len(s.calls)
	steps := []func() error{
		func() error { return e.waitPrev(cross, st, prev, evH2DEnd) },
		func() error { return d.Record(s.ev[evH2DStart], st) },
		func() error { return d.HtoD(st, s.dev[bufIn], 0, s.in[:s.inBytes]) },
		func() error {
			if e.tabBytes == 0 {
				return nil
			}
			return d.HtoD(st, s.dTab, 0, s.tab)
		},
		func() error { return d.Record(s.ev[evH2DEnd], st) },
		func() error { return e.waitPrev(cross, st, prev, evOpEnd0+nOps-1) },
		func() error { return d.Record(s.ev[evKStart], st) },
	}
	for _, step := range steps {
		if err := step(); err != nil {
			return err
		}
	}
	for j := range s.calls {
		if err := d.Run(st, &s.calls[j]); err != nil {
			return fmt.Errorf("%s: %w", s.calls[j].Op, err)
		}
		if err := d.Record(s.ev[evOpEnd0+j], st); err != nil {
			return err
		}
	}
	if err := e.waitPrev(cross, st, prev, evOpEnd0+nOps+1); err != nil {
		return err
	}
	if err := d.Record(s.ev[evOpEnd0+nOps], st); err != nil {
		return err
	}
	if fb := c.finalBuf(); fb >= 0 && s.outBytes > 0 {
		if err := d.DtoH(st, s.out[:s.outBytes], s.dev[fb], 0); err != nil {
			return err
		}
	}
	if c.hasHist {
		if err := d.DtoH(st, s.hist[:len(s.live)*HistBytes], s.dHist, 0); err != nil {
			return err
		}
	}
	return d.Record(s.ev[evOpEnd0+nOps+1], st)
}

func (e *Executor) waitPrev(cross bool, st Stream, prev *slot, ev int) error {
	if !cross {
		return nil
	}
	return e.dev.StreamWait(st, prev.ev[ev])
}

// waiter waits for each submitted batch's D2H, in submission order, and
// delivers its results. After a stop it waits for the device to finish with
// the abandoned batches before freeing their slots.
func (e *Executor) waiter() {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	defer close(e.finished)
	defer close(e.results)
	if err := e.dev.BindThread(); err != nil {
		e.stop(fmt.Errorf("%s: %w", e.dev.Name(), err))
	}
	var abandoned []*slot
	for s := range e.inflight {
		if !s.abandoned && !e.isHalted() {
			err := e.complete(s)
			if err == nil {
				continue
			}
			e.stop(fmt.Errorf("%s: batch %d: %w", e.dev.Name(), s.seq, err))
		}
		abandoned = append(abandoned, s)
	}
	if len(abandoned) > 0 {
		// The device may still read or write these slots' memory: let every
		// stream drain (errors are those of the stop, already reported).
		for _, st := range e.streams {
			_ = e.dev.SyncStream(st)
		}
		e.mu.Lock()
		for _, s := range abandoned {
			e.recycleLocked(s)
		}
		e.mu.Unlock()
	}
	e.mu.Lock()
	e.done = true
	e.mu.Unlock()
	e.unwatch()
}

// complete waits for a batch, accounts and traces it, and delivers its
// results.
func (e *Executor) complete(s *slot) error {
	d := e.dev
	last := s.ev[len(s.ev)-1]
	if err := d.WaitEvent(last); err != nil {
		return err
	}
	for i, ev := range s.ev {
		t, err := d.Elapsed(e.base, ev)
		if err != nil {
			return err
		}
		s.at[i] = t
	}
	for k, p := range e.phases {
		t, err := d.Elapsed(s.ev[p[0]], s.ev[p[1]])
		if err != nil {
			return err
		}
		s.dur[k] = t
	}
	var pixels int64
	for _, l := range s.layouts {
		pixels += int64(l.shapes[0].W) * int64(l.shapes[0].H)
	}
	histBytes := 0
	if e.chain.hasHist {
		histBytes = len(s.live) * HistBytes
	}
	e.statsMu.Lock()
	e.stats.add(s.at[evH2DStart], s.at[len(s.at)-1], s.dur, len(s.live), pixels, int64(s.inBytes+e.tabBytes), int64(s.outBytes+histBytes))
	e.statsMu.Unlock()
	if e.trace != nil {
		e.traceBatch(s)
	}

	e.mu.Lock()
	s.held = len(s.live)
	e.mu.Unlock()
	fb := e.chain.finalBuf()
	for i, r := range s.live {
		l := r.lay
		res := &Result{Tag: r.tag, In: l.shapes[0], e: e, s: s}
		if fb < 0 {
			res.Image = r.img
		} else {
			out := l.shapes[len(l.shapes)-1]
			off := l.offs[len(l.offs)-1]
			res.Image = &stages.Image{W: out.W, H: out.H, C: out.C, Stride: out.W * out.C,
				Pix: s.out[off : off+out.Bytes() : off+out.Bytes()]}
		}
		if e.chain.hasHist {
			h := new([256]uint64)
			b := s.hist[i*HistBytes : (i+1)*HistBytes]
			for k := range h {
				h[k] = binary.LittleEndian.Uint64(b[8*k:])
			}
			res.Hist = h
		}
		e.results <- res // results has room for every slot's images
	}
	return nil
}

func (e *Executor) traceBatch(s *slot) {
	track := e.streamTracks[s.stream]
	n := len(s.live)
	d2h := s.outBytes
	if e.chain.hasHist {
		d2h += n * HistBytes
	}
	last := len(e.phases) - 1
	for k, p := range e.phases {
		name, args := "", map[string]any{"batch": s.seq, "images": n}
		switch k {
		case 0:
			name, args["bytes"] = "H2D", s.inBytes+e.tabBytes
		case last:
			name, args["bytes"] = "D2H", d2h
		default:
			name = s.calls[k-1].Op.String()
		}
		e.trace.Span(track, name, e.hostBase.Add(s.at[p[0]]), s.dur[k], args)
	}
}

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
