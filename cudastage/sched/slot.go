package sched

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/imgpipe/imgpipe/memory/devmem"
	"github.com/imgpipe/imgpipe/memory/pinned"
)

// Slot events, in stream order. The start of H2D, of the kernels and of D2H
// is recorded after the cross-stream wait for the previous batch's phase
// (see submit). The decode events are recorded for every batch (back to back
// when it has no file), so that every batch has the same phases.
const (
	evH2DStart = iota
	evH2DEnd
	evDecStart
	evDecEnd
	evKStart
	evOpEnd0 // op j's end is evOpEnd0+j; then D2H start and D2H end (see evD2H)
)

// evD2H is the index of a batch's D2H start event; its end is evD2H+1. With an
// encoding last op, that D2H brings the file lengths, and evD2H+2 and evD2H+3
// time the second D2H, of the files' bytes.
func evD2H(nOps int) int { return evOpEnd0 + nOps }

// numEvents is the number of events of a slot.
func numEvents(nOps int, encode bool) int {
	if encode {
		return evD2H(nOps) + 4
	}
	return evD2H(nOps) + 2
}

// Phase kinds: what a phase's duration adds to in Stats.
const (
	phaseH2D = iota
	phaseDecode
	phaseOp
	phaseD2H
)

// phase is one timed phase of a batch: its kind, its op for phaseOp, and its
// start and end events. Durations are measured event to event, exactly,
// rather than as differences of times from the base event, which lose
// precision as a run gets long (CUDA gives float32 milliseconds).
type phase struct {
	kind, op   int
	start, end int
}

// phases lists a batch's phases: H2D, decode, each op, D2H, and with an
// encoding last op the files' D2H.
func phases(nOps int, encode bool) []phase {
	p := []phase{{kind: phaseH2D, start: evH2DStart, end: evH2DEnd}, {kind: phaseDecode, start: evDecStart, end: evDecEnd},
		{kind: phaseOp, op: 0, start: evKStart, end: evOpEnd0}}
	for j := 1; j < nOps; j++ {
		p = append(p, phase{kind: phaseOp, op: j, start: evOpEnd0 + j - 1, end: evOpEnd0 + j})
	}
	p = append(p, phase{kind: phaseD2H, start: evD2H(nOps), end: evD2H(nOps) + 1})
	if encode {
		p = append(p, phase{kind: phaseD2H, start: evD2H(nOps) + 2, end: evD2H(nOps) + 3})
	}
	return p
}

// slot is one batch's memory and events. Its batch fields are guarded by
// Executor.mu while it fills; between submission and delivery only the
// submitter and then the waiter touch it, handing it over by channel.
type slot struct {
	id                       int
	in, out, hist, tab, lens []byte    // page-locked; out nil when no op makes an image, lens when none encodes
	values                   []byte    // page-locked reduction values, nil when no op reduces
	dev                      [2]DevPtr // bufIn, bufMid
	dHist, dTab, dLens       DevPtr
	dValues                  DevPtr
	hostBufs                 []*pinned.Buffer // behind in, out, hist, tab
	devBlocks                []*devmem.Block  // behind dev, dHist, dTab
	ev                       []Event
	calls                    []OpCall
	at                       []time.Duration // event times from the base event
	dur                      []time.Duration // phase durations, see phases
	dec                      DecodeCall      // the batch's files, decoded on the device before the ops

	// filling (under Executor.mu)
	gen  uint64
	res  []*Reservation
	used []int // per area, see chain.caps: the device input area holds raw and decoded images
	// rawUsed and fileUsed are the page-locked input's use: raw images packed
	// from its start (at the offsets they have in the device input, so that
	// one H2D copies them all), files' bytes packed from its end.
	rawUsed, fileUsed int
	pending           int
	sealed            bool
	timer             *time.Timer

	// submitted (submitter, then the stream's goroutine, then waiter)
	ord, prevOrd *order  // the batch's marks and the previous batch's (see order.go)
	prevEv       []Event // the previous batch's events
	cross        bool    // the previous batch ran on another stream
	live         []*Reservation
	layouts      []imgLayout
	decIdx       []int // per live image, its index in dec.Images, or -1 for a raw image
	seq          int64
	stream       int
	abandoned    bool
	inBytes      int
	outBytes     int

	// delivered (under Executor.mu)
	held    int
	freeMem bool // Close ran while results were held: free on last release
}

// memory is the page-locked and device memory the slots and streams hold:
// host buffers of exactly their size, device blocks rounded as the device
// allocator rounds them (devmem.RoundSize).
func (e *Executor) memory() (host, dev int64) {
	for _, b := range e.slotBufs() {
		host += int64(b.host) * int64(e.cfg.Slots)
		dev += int64(devmem.RoundSize(uint64(b.dev))) * int64(e.cfg.Slots)
	}
	if n := e.scratchBytes(); n > 0 {
		dev += int64(devmem.RoundSize(uint64(n))) * int64(e.cfg.Streams)
	}
	return host, dev
}

// bufSize is one slot buffer's size in page-locked memory and on the
// device.
type bufSize struct{ host, dev int }

// slotBufs are the sizes of a slot's buffers, each held once in page-locked
// memory and once on the device: the input, the output when an op makes an
// image, the histograms when an op makes one, the reduction values when an
// op reduces, the launch tables, and the file lengths when the last op
// encodes. The page-locked input holds raw
// images and files' bytes (Config.HostInBytes), the device input raw and
// decoded images (SlotBytes): each is accounted on its own (see
// slot.rawUsed). The page-locked output holds the batch's outputs
// (Config.HostOutBytes), the second device buffer those of every op.
// Every other buffer has the same size on both sides.
func (e *Executor) slotBufs() []bufSize { return slotBufs(e.cfg, e.chain, e.tabBytes) }

// slotBufs is Executor.slotBufs for a segment c laid out as ch, with tabBytes
// of launch tables (tableLayout).
func slotBufs(c Config, ch *chain, tabBytes int) []bufSize {
	bufs := []bufSize{{c.hostIn(), c.SlotBytes}}
	same := func(n int) { bufs = append(bufs, bufSize{n, n}) }
	if ch.nImg > 0 {
		bufs = append(bufs, bufSize{c.hostOut(), c.SlotBytes})
	}
	if ch.hasHist {
		same(c.Batch * HistBytes)
	}
	if ch.nValues > 0 {
		same(AlignUp(c.Batch * ch.nValues * ElemBytes))
	}
	if tabBytes > 0 {
		same(tabBytes)
	}
	if ch.encode != nil {
		same(AlignUp(4 * c.Batch))
	}
	return bufs
}

// tableLayout places each op's launch table in a slot's table region: its
// offset, per op, and the region's size.
func tableLayout(dev Device, c Config) (off []int, size int) {
	for _, op := range c.Ops {
		off = append(off, size)
		size += AlignUp(dev.TableBytes(op, c.Batch))
	}
	return off, size
}

// HostBytes is the page-locked memory that New(ctx, dev, c) takes for its
// slots (Stats.HostBytes, what MaxHostBytes bounds), for sizing a
// configuration to a budget before starting it. c is not checked.
func HostBytes(dev Device, c Config) int64 {
	_, tab := tableLayout(dev, c)
	var n int64
	for _, b := range slotBufs(c, newChain(c.Ops, c.SlotBytes, c.hostOut()), tab) {
		n += int64(b.host)
	}
	return n * int64(c.Slots)
}

func (e *Executor) scratchBytes() int {
	n := 0
	for _, op := range e.cfg.Ops {
		n = max(n, e.dev.ScratchBytes(op, e.cfg.SlotBytes, e.cfg.Batch))
	}
	return n
}

// allocate creates the streams, their scratch, the base event and the slots,
// taking memory from the pools (waiting for a shared pool's budget until ctx
// ends).
func (e *Executor) allocate(ctx context.Context) error {
	d, c := e.dev, e.cfg
	for range c.Streams {
		s, err := d.NewStream()
		if err != nil {
			return err
		}
		e.streams = append(e.streams, s)
		var p DevPtr
		if n := e.scratchBytes(); n > 0 {
			b, err := e.devPool.Alloc(uint64(n), slotStream)
			if err != nil {
				return err
			}
			e.scratchBlocks = append(e.scratchBlocks, b)
			p = DevPtr(b.Ptr)
		}
		e.scratch = append(e.scratch, p)
	}
	var err error
	if e.chain.encode != nil {
		// The files' D2H is enqueued by the waiter once it read the lengths: on a
		// stream of its own, so that it never queues behind later batches.
		if e.fileStream, err = d.NewStream(); err != nil {
			return err
		}
	}
	if e.base, err = d.NewEvent(); err != nil {
		return err
	}
	nOps := len(c.Ops)
	for i := range c.Slots {
		s := &slot{id: i, used: make([]int, 1+e.chain.nImg), calls: make([]OpCall, nOps),
			at: make([]time.Duration, numEvents(nOps, e.chain.encode != nil)), dur: make([]time.Duration, len(e.phases))}
		s.dec.Images = make([]DecodeImage, 0, c.Batch)
		e.slots = append(e.slots, s)
		for j := range s.calls {
			s.calls[j].Images = make([]OpImage, 0, c.Batch)
		}
	}
	// Only the first slot's memory is taken here; allocRest takes the
	// others while the first batch fills (see New).
	if err := e.allocSlot(ctx, e.slots[0]); err != nil {
		return err
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

// allocRest takes the memory of every slot but the first, one slot at a
// time, on the device thread, and puts each on the free list as soon as it
// has its memory: page-locking GiBs takes long (about a second for 2 GiB),
// and the first batch needs only one slot. A failure stops the executor
// with the error; a stop ends it early (ctx is cancelled by stop). Close
// waits for it (allocDone) before freeing.
func (e *Executor) allocRest(ctx context.Context) {
	defer close(e.allocDone)
	err := e.onDeviceThread(func() error {
		for _, s := range e.slots[1:] {
			if ctx.Err() != nil {
				return nil
			}
			if err := e.allocSlot(ctx, s); err != nil {
				return fmt.Errorf("slot %d: %w", s.id, err)
			}
			e.toFree(s)
		}
		return nil
	})
	if err != nil && ctx.Err() == nil {
		e.stop(fmt.Errorf("executor on %s: %w", e.dev.Name(), err))
	}
}

// allocSlot takes a slot's buffers from the pools (see slotBufs) and makes
// its events.
func (e *Executor) allocSlot(ctx context.Context, s *slot) error {
	host := []*[]byte{&s.in}
	dev := []*DevPtr{&s.dev[bufIn]}
	if e.chain.nImg > 0 {
		host, dev = append(host, &s.out), append(dev, &s.dev[bufMid])
	}
	if e.chain.hasHist {
		host, dev = append(host, &s.hist), append(dev, &s.dHist)
	}
	if e.chain.nValues > 0 {
		host, dev = append(host, &s.values), append(dev, &s.dValues)
	}
	if e.tabBytes > 0 {
		host, dev = append(host, &s.tab), append(dev, &s.dTab)
	}
	if e.chain.encode != nil {
		host, dev = append(host, &s.lens), append(dev, &s.dLens)
	}
	for i, n := range e.slotBufs() {
		hb, err := e.hostPool.GetExact(ctx, n.host)
		if err != nil {
			return err
		}
		s.hostBufs = append(s.hostBufs, hb)
		*host[i] = hb.Bytes()
		db, err := e.devPool.Alloc(uint64(n.dev), slotStream)
		if err != nil {
			return err
		}
		s.devBlocks = append(s.devBlocks, db)
		*dev[i] = DevPtr(db.Ptr)
	}
	for range numEvents(len(e.cfg.Ops), e.chain.encode != nil) {
		ev, err := e.dev.NewEvent()
		if err != nil {
			return err
		}
		s.ev = append(s.ev, ev)
	}
	return nil
}

// freeSlot gives a slot's buffers back to the pools and destroys its events,
// keeping every error.
func (e *Executor) freeSlot(s *slot) error {
	var errs []error
	for _, b := range s.hostBufs {
		errs = append(errs, e.hostPool.Put(b))
	}
	for _, b := range s.devBlocks {
		errs = append(errs, e.devPool.Free(b))
	}
	for _, ev := range s.ev {
		errs = append(errs, e.dev.DestroyEvent(ev))
	}
	s.hostBufs, s.devBlocks = nil, nil
	s.in, s.out, s.hist, s.tab, s.lens, s.values, s.ev = nil, nil, nil, nil, nil, nil, nil
	s.dev, s.dHist, s.dTab, s.dLens, s.dValues = [2]DevPtr{}, 0, 0, 0, 0
	return errors.Join(errs...)
}

// freeAll releases everything New allocated, except slots whose results are
// still held (they are freed on their last Release), and closes the pools
// the executor made (whose buffers in use go back to the device when
// freed).
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
	for _, b := range e.scratchBlocks {
		errs = append(errs, e.devPool.Free(b))
	}
	if e.base != 0 {
		errs = append(errs, e.dev.DestroyEvent(e.base))
	}
	for _, s := range e.allStreams() {
		errs = append(errs, e.dev.DestroyStream(s))
	}
	e.scratch, e.scratchBlocks, e.streams, e.fileStream, e.base = nil, nil, nil, 0, 0
	errs = append(errs, e.closePools())
	return errors.Join(errs...)
}

// allStreams are the batch streams and, with an encoding last op, the files'
// D2H stream.
func (e *Executor) allStreams() []Stream {
	if e.fileStream == 0 {
		return e.streams
	}
	return append(e.streams[:len(e.streams):len(e.streams)], e.fileStream)
}
