package sched

import (
	"encoding/binary"
	"fmt"
	"runtime"
	"time"

	"github.com/imgpipe/imgpipe/stages"
)

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
