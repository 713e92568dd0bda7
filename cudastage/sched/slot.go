package sched

import (
	"errors"
	"time"
)

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
