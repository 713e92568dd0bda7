package sched

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/imgpipe/imgpipe/memory/devmem"
	"github.com/imgpipe/imgpipe/memory/pinned"
)

// Errors of the executor's API.
var (
	// ErrTooLarge wraps the error for an image that does not fit in an empty
	// slot. The caller should run that image on the CPU path instead.
	ErrTooLarge = errors.New("image too large for a device slot")
	// ErrNoRoom is what a reservation returns, instead of waiting, when
	// Config.Room is set and no slot has room for the image now.
	ErrNoRoom = errors.New("no slot has room now")
	// ErrInputClosed is returned by Reserve after CloseInput.
	ErrInputClosed = errors.New("executor input is closed")
	// ErrClosed is the executor's error when Close stopped it mid-run.
	ErrClosed = errors.New("executor closed")
	// ErrEncoderBound is wrapped by a Result's Err when the segment's encoder
	// gave a length outside its bound (a bug of the encoder or its Bound).
	ErrEncoderBound = errors.New("encoder output outside its bound")
)

// Limits of Config. The executor has no defaults: the caller sets every
// field (packages pipeline and pipeline/gpu hold the defaults of a run:
// DefaultStreams, DefaultBatch; DefaultSlots, DefaultSlotBytes, DefaultLinger).
const (
	MaxStreams   = 64
	MaxSlots     = 256
	MaxBatch     = 4096
	MaxSlotBytes = 1 << 36
)

// Config sets up an Executor.
type Config struct {
	// Ops is the device segment: the pixel ops every image goes through.
	Ops []Op
	// Streams is the number of device streams, in [1, MaxStreams]; the
	// caller sets it. With the executor's cross-stream ordering (see Stats),
	// 2 streams already overlap one batch's copies with another's kernels,
	// and 3 overlap one batch's H2D, the previous one's kernels and the one
	// before's D2H.
	Streams int
	// Slots is the number of batches in flight, from filling to released, in
	// [1, MaxSlots]; the caller sets it. gpu.DefaultSlots gives
	// Streams+2: one per stream on the device, one being filled by decode
	// workers, and one held by save workers. Memory is bounded by Slots × the
	// slot size: every buffer is taken from the pools once (the first slot's
	// by New, the others' in the background), and nothing is allocated per
	// batch.
	Slots int
	// Batch is the most images a slot takes, in [1, MaxBatch]; the caller
	// sets it.
	Batch int
	// SlotBytes is a slot's input capacity in bytes, in [Align,
	// MaxSlotBytes]; the caller sets it (gpu.DefaultSlotBytes gives room
	// for Batch 1080p RGB frames). Every buffer of the segment has this
	// capacity, since no op makes more bytes than it reads.
	SlotBytes int
	// HostInBytes, when positive, is the capacity of a slot's page-locked
	// input, in [Align, SlotBytes]: it holds the raw images' pixels and the
	// files' bytes (ReserveFile), while the decoded pixels live only on the
	// device (SlotBytes). A caller whose inputs are mostly files sets it
	// from their bytes, so that no page-locked memory is held for pixels
	// that never cross the link; a raw image larger than it is ErrTooLarge.
	// 0 means SlotBytes.
	HostInBytes int
	// HostOutBytes, when positive, is the capacity of a slot's page-locked
	// output, in [Align, SlotBytes]: it holds the segment's output images
	// (or files) of a batch. A caller whose chain makes smaller images than
	// it reads (a thumbnail, a gray image) sets it from that ratio, so that
	// no page-locked memory is held for bytes no output uses; a batch whose
	// outputs fill it is sealed early, and an image whose output alone is
	// larger is ErrTooLarge. 0 means SlotBytes.
	HostOutBytes int
	// Linger, when positive, seals a partly filled slot this long after it
	// opened, so that a slow or paused input never holds images back. Zero or
	// negative: a slot is sealed only when full, on Flush or on CloseInput.
	Linger time.Duration
	// MaxHostBytes and MaxDeviceBytes, when positive, refuse a Config whose
	// slots would hold more page-locked or device memory, before allocating,
	// and are the budgets of the pools the executor makes itself.
	MaxHostBytes, MaxDeviceBytes int64
	// HostPool, when not nil, is the page-locked pool the slots' host buffers
	// come from: pinned.New over HostAllocator(dev), or over pinned.Heap with
	// Pageable. Close gives the buffers back and leaves the pool open, so
	// that executors run one after another on dev (a benchmark sweep) reuse
	// them; New refuses slots that need more than its budget, and waits
	// (until ctx ends) while other users hold the budget. When nil, the
	// executor makes its own pool and closes it.
	HostPool *pinned.Pool
	// DevicePool, when not nil, is the device allocator the slots' device
	// buffers and the streams' scratch come from: devmem.New over
	// DeviceDriver(dev). Close gives the blocks back and leaves it open, like
	// HostPool; a request over its budget fails. When nil, the executor makes
	// its own allocator and closes it.
	DevicePool *devmem.Allocator
	// WarmDecoder says that the caller will reserve files (ReserveFile):
	// when the Device implements DecoderWarmer, each stream's goroutine
	// warms the decoder up on its stream as the executor starts, so that
	// its one-time setup overlaps the first files' reads instead of
	// delaying the first batch. No batch is submitted before every stream
	// is warm.
	WarmDecoder bool
	// Pageable puts the slots' host memory on the Go heap instead of
	// page-locked memory. The device then copies synchronously (after the
	// stream's earlier work), which is the textbook flow: it exists to measure
	// what page-locked memory and overlap gain, not for real runs.
	Pageable bool
	// Trace, when not nil, receives one track per stream with each batch's
	// H2D, decode, kernels and D2H, and one "submit" track per stream.
	Trace Tracer
	// Room, when set, is for a caller that spreads images over several
	// executors: Reserve, ReserveFile and ReserveArray then never wait for a
	// slot but return ErrNoRoom at once when the open slot cannot take the
	// image and none is free, and Room is called every time a slot joins the
	// free list, so that the caller knows when to try again. It may be called
	// with the executor's lock held: it must not block nor call the executor.
	Room func()
}

// check validates c for dev without changing it, and reports every problem.
func (c Config) check(dev Device) error {
	var errs []error
	if err := checkOps(dev, c.Ops); err != nil {
		errs = append(errs, err)
	}
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
	if c.HostInBytes != 0 && (c.HostInBytes < Align || c.HostInBytes > c.SlotBytes) {
		errs = append(errs, fmt.Errorf("host input bytes %d out of range [%d, slot bytes %d]", c.HostInBytes, Align, c.SlotBytes))
	}
	if c.HostOutBytes != 0 && (c.HostOutBytes < Align || c.HostOutBytes > c.SlotBytes) {
		errs = append(errs, fmt.Errorf("host output bytes %d out of range [%d, slot bytes %d]", c.HostOutBytes, Align, c.SlotBytes))
	}
	return errors.Join(errs...)
}

// hostOut is the capacity of a slot's page-locked output (see HostOutBytes).
func (c Config) hostOut() int { return cmp.Or(c.HostOutBytes, c.SlotBytes) }

// hostIn is the capacity of a slot's page-locked input (see HostInBytes).
func (c Config) hostIn() int {
	if c.HostInBytes > 0 {
		return c.HostInBytes
	}
	return c.SlotBytes
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

	hostPool        *pinned.Pool      // where the slots' host buffers come from
	devPool         *devmem.Allocator // where device buffers come from
	ownHost, ownDev bool              // the pools are the executor's: Close closes them
	streams         []Stream
	fileStream      Stream          // the files' D2H, with an encoding last op; else 0
	scratch         []DevPtr        // per stream
	scratchBlocks   []*devmem.Block // behind scratch
	base            Event
	hostBase        time.Time
	tabOff          []int // per op, into a slot's table region
	phases          []phase
	tabBytes        int
	slots           []*slot

	free     chan *slot
	ready    chan *slot
	inflight chan *slot
	results  chan *Result
	quit     chan struct{}
	finished chan struct{}
	unwatch  func() bool
	// warming counts the streams' goroutines that have not yet warmed the
	// decoder up (streamSubmitter): none submits a batch before all have.
	warming sync.WaitGroup
	// allocDone is closed when allocRest ended; allocStop cancels its
	// context (stop calls it).
	allocDone chan struct{}
	allocStop context.CancelFunc

	trace        Tracer
	streamTracks []string
	submitTracks []string // per stream: its goroutine's submissions

	mu   sync.Mutex
	open *slot
	// opened is closed (and replaced) whenever a slot opens, so that a Reserve waiting for
	// a free slot looks again at the open one: with no linger timer, the open slot would
	// otherwise never be sealed while another reserver waits beside it.
	opened      chan struct{}
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

// New allocates the streams and the first slot on dev and starts the
// executor; the other slots get their memory in the background, each joining
// the free list when it has it (allocRest), so that the first batch does not
// wait for all of it. The memory is checked against the limits before any
// is taken. The executor stops when ctx is cancelled, or with the error
// when a slot's memory cannot be had. The caller must call Close.
func New(ctx context.Context, dev Device, cfg Config) (*Executor, error) {
	if err := cfg.check(dev); err != nil {
		return nil, fmt.Errorf("executor: %w", err)
	}
	e := &Executor{
		dev:       dev,
		cfg:       cfg,
		chain:     newChain(cfg.Ops, cfg.SlotBytes, cfg.hostOut()),
		free:      make(chan *slot, cfg.Slots),
		opened:    make(chan struct{}),
		ready:     make(chan *slot, cfg.Slots),
		inflight:  make(chan *slot, cfg.Slots),
		results:   make(chan *Result, cfg.Slots*cfg.Batch),
		quit:      make(chan struct{}),
		finished:  make(chan struct{}),
		allocDone: make(chan struct{}),
		trace:     cfg.Trace,
	}
	e.phases = phases(len(cfg.Ops), e.chain.encode != nil)
	e.stats = Stats{Device: dev.Name(), Streams: cfg.Streams, Slots: cfg.Slots, Batch: cfg.Batch, SlotBytes: cfg.SlotBytes}
	for _, op := range cfg.Ops {
		e.stats.Ops = append(e.stats.Ops, OpTime{Op: op.String()})
	}
	e.tabOff, e.tabBytes = tableLayout(dev, cfg)
	host, devBytes := e.memory()
	e.stats.HostBytes, e.stats.DeviceBytes = host, devBytes
	maxHost, maxDev := e.limits()
	if maxHost > 0 && host > maxHost {
		return nil, fmt.Errorf("executor: %d slots need %d MiB of page-locked memory, over the %d MiB limit",
			cfg.Slots, host>>20, maxHost>>20)
	}
	if maxDev > 0 && devBytes > maxDev {
		return nil, fmt.Errorf("executor: %d slots need %d MiB of device memory, over the %d MiB limit",
			cfg.Slots, devBytes>>20, maxDev>>20)
	}
	if err := e.openPools(host, devBytes); err != nil {
		return nil, fmt.Errorf("executor: %w", err)
	}
	if err := e.onDeviceThread(func() error { return e.allocate(ctx) }); err != nil {
		e.onDeviceThread(e.freeAll)
		return nil, fmt.Errorf("executor on %s: %w", dev.Name(), err)
	}
	for i := range e.streams {
		e.streamTracks = append(e.streamTracks, fmt.Sprintf("%s stream %d", dev.Name(), i))
	}
	for i := range e.streams {
		e.submitTracks = append(e.submitTracks, fmt.Sprintf("%s submit %d", dev.Name(), i))
	}
	e.free <- e.slots[0]
	var allocCtx context.Context
	allocCtx, e.allocStop = context.WithCancel(ctx)
	e.unwatch = context.AfterFunc(ctx, func() { e.stop(context.Cause(ctx)) })
	go e.submitter()
	go e.waiter()
	go e.allocRest(allocCtx)
	return e, nil
}

// onDeviceThread runs fn on the calling goroutine locked to its OS thread,
// with the device bound to that thread.
func (e *Executor) onDeviceThread(fn func() error) error { return bound(e.dev, fn) }

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
	e.allocStop()
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
	<-e.allocDone
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
	e.allocStop()
	<-e.allocDone // no slot gets memory while freeAll runs
	return e.onDeviceThread(e.freeAll)
}

// Stats returns the totals so far, with the pools' figures now.
func (e *Executor) Stats() Stats {
	e.statsMu.Lock()
	s := e.stats
	s.Ops = append([]OpTime(nil), e.stats.Ops...)
	e.statsMu.Unlock()
	s.HostPool, s.DevicePool = e.hostPool.Stats(), e.devPool.Stats()
	return s
}

// ResetStats zeroes the batch totals (after a warm-up, say). The pools'
// figures are not the executor's to reset.
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
