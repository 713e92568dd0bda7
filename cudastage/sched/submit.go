package sched

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"runtime"
	"sync"
	"time"

	"github.com/imgpipe/imgpipe/stages"
)

// submitter hands the ready slots to the streams round robin, each to its
// stream's goroutine (see order.go), and closes inflight once every stream's
// goroutine ended.
func (e *Executor) submitter() {
	defer close(e.inflight)
	queues := make([]chan *slot, len(e.streams))
	e.warming.Add(len(e.streams))
	var wg sync.WaitGroup
	for i := range queues {
		queues[i] = make(chan *slot, e.cfg.Slots) // room for every slot
		wg.Add(1)
		go func() {
			defer wg.Done()
			e.streamSubmitter(i, queues[i])
		}()
	}
	prev, prevStream, prevEv := doneOrder(), -1, []Event(nil)
	var seq int64
	for s := range e.ready {
		s.seq, s.stream = seq, int(seq%int64(len(e.streams)))
		s.prevOrd, s.ord = prev, newOrder()
		s.cross, s.prevEv = prevStream >= 0 && prevStream != s.stream, prevEv
		queues[s.stream] <- s
		prev, prevStream, prevEv = s.ord, s.stream, s.ev
		seq++
	}
	for _, q := range queues {
		close(q)
	}
	wg.Wait()
}

// streamSubmitter enqueues stream i's batches, in order, from its own OS
// thread, after warming the device's file decoder up on the stream when the
// executor decodes files (Config.WarmDecoder) and waiting for the other
// streams' warm-ups.
func (e *Executor) streamSubmitter(i int, queue <-chan *slot) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := e.dev.BindThread(); err != nil {
		e.stop(fmt.Errorf("%s: %w", e.dev.Name(), err))
	} else if err := e.warm(i); err != nil {
		e.stop(fmt.Errorf("%s: warming the file decoder up: %w", e.dev.Name(), err))
	}
	// No batch goes before every stream is warm: nvJPEG aborts the process when it
	// creates a decoder state in a context that a faulting kernel of an earlier batch
	// has just made unusable (seen on an H200 with a faulting user kernel).
	e.warming.Done()
	e.warming.Wait()
	for s := range queue {
		e.submitOne(s)
	}
}

// warm warms the device's file decoder up on stream i when the executor
// decodes files and the decoder implements DecoderWarmer.
func (e *Executor) warm(i int) error {
	if !e.cfg.WarmDecoder {
		return nil
	}
	w, ok := e.dev.(DecoderWarmer)
	if !ok {
		return nil
	}
	t0 := time.Now()
	err := w.WarmDecoder(e.streams[i], e.cfg.Batch)
	if e.trace != nil {
		e.trace.Span(e.submitTracks[i], "warm decoder", t0, time.Since(t0), nil)
	}
	return err
}

// errHalted ends a batch's submission when the executor stopped meanwhile
// (for another batch's error, Close or the context): the batch is abandoned.
var errHalted = errors.New("executor halted")

// submitOne submits batch s and hands it to the waiter in batch order (after
// the previous batch), whatever happens: every batch makes all its marks, so
// the next one never waits forever.
func (e *Executor) submitOne(s *slot) {
	defer s.ord.reach(markDone)
	if e.isHalted() {
		s.prevOrd.wait(markDone)
		e.mu.Lock()
		e.recycleLocked(s)
		e.mu.Unlock()
		return
	}
	t0 := time.Now()
	if err := e.submit(s); err != nil {
		if !errors.Is(err, errHalted) {
			e.stop(fmt.Errorf("%s: batch %d: %w", e.dev.Name(), s.seq, err))
		}
		s.abandoned = true
	}
	if e.trace != nil {
		e.trace.Span(e.submitTracks[s.stream], "submit", t0, time.Since(t0), map[string]any{"batch": s.seq, "images": len(s.live)})
	}
	s.prevOrd.wait(markDone)
	e.inflight <- s // inflight has room for every slot
}

// gather takes the committed images of a sealed slot in reservation order,
// places its files' decoded images after its raw images in the device input,
// and fills its decode call.
func (e *Executor) gather(s *slot) {
	s.live, s.layouts, s.decIdx = s.live[:0], s.layouts[:0], s.decIdx[:0]
	s.dec.Images, s.dec.Dst = s.dec.Images[:0], s.dev[bufIn]
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, r := range s.res {
		if r.state != resCommitted {
			continue
		}
		idx := -1
		if f := r.file; f != nil {
			r.lay.offs[0] = s.rawUsed + f.decOff
			idx = len(s.dec.Images)
			s.dec.Images = append(s.dec.Images, DecodeImage{Data: f.data, Shape: r.lay.shapes[0], Orient: f.Orient,
				Scale: f.Scale, DstOff: r.lay.offs[0], Decoder: f.Decoder})
		}
		s.live = append(s.live, r)
		s.layouts = append(s.layouts, r.lay)
		s.decIdx = append(s.decIdx, idx)
	}
	s.inBytes = s.rawUsed
}

// submit enqueues one batch: [wait prev H2D] H2D decode [wait prev kernels]
// ops [wait prev D2H] D2H, with events around each phase. The waits order
// the copies and kernels of consecutive batches across streams, so each copy
// engine and the SMs work on one batch at a time in order and the events time
// real work (see Stats). Decode has no such wait: the decodes of batches on
// different streams overlap, on the several hardware decode engines, and a
// decode that blocks the host (nvJPEG's batched call) blocks only its
// stream's goroutine. With an encoding last op the D2H brings the files'
// lengths; the waiter then brings their bytes (see complete).
func (e *Executor) submit(s *slot) error {
	d, c := e.dev, e.chain
	st := e.streams[s.stream]
	e.gather(s)
	c.fillCalls(s.calls, s.layouts, s.dev, s.dHist, s.dValues)
	s.outBytes = 0
	if fb := c.finalBuf(); fb >= 0 && c.encode == nil {
		s.outBytes = s.used[len(s.used)-1]
	}
	for j := range s.calls {
		call := &s.calls[j]
		call.Scratch = e.scratch[s.stream]
		call.Table, call.TableOff = s.dTab, e.tabOff[j]
		call.Lens = 0
		if call.Op.Encode != nil {
			call.Lens = s.dLens
		}
		if n := d.TableBytes(call.Op, len(s.live)); n > 0 {
			if e.tabOff[j]+n > len(s.tab) {
				return fmt.Errorf("%s table of %d bytes overflows its %d-byte region", call.Op, n, len(s.tab)-e.tabOff[j])
			}
			if err := d.EncodeTable(call, s.tab[e.tabOff[j]:e.tabOff[j]+n]); err != nil {
				return err
			}
		}
	}
	nOps := len(s.calls)
	d2h := evD2H(nOps)
	steps := []func() error{
		func() error { return e.waitPrev(s, markH2D, evH2DEnd) },
		func() error { return d.Record(s.ev[evH2DStart], st) },
		func() error {
			if s.inBytes == 0 {
				return nil // files only: their bytes cross with the decode
			}
			return d.HtoD(st, s.dev[bufIn], 0, s.in[:s.inBytes])
		},
		func() error {
			if e.tabBytes == 0 {
				return nil
			}
			return d.HtoD(st, s.dTab, 0, s.tab)
		},
		func() error { return e.mark(s, markH2D, evH2DEnd) },
		func() error { return d.Record(s.ev[evDecStart], st) },
		func() error {
			if len(s.dec.Images) == 0 {
				return nil
			}
			fd, err := FileDecoderOf(d)
			if err != nil {
				return err
			}
			return fd.Decode(st, &s.dec)
		},
		func() error { return d.Record(s.ev[evDecEnd], st) },
		func() error { return e.waitPrev(s, markKernels, evOpEnd0+nOps-1) },
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
	s.ord.reach(markKernels)
	if err := e.waitPrev(s, markDone, d2h+1); err != nil {
		return err
	}
	if err := d.Record(s.ev[d2h], st); err != nil {
		return err
	}
	if fb := c.finalBuf(); fb >= 0 && s.outBytes > 0 {
		if err := d.DtoH(st, s.out[:s.outBytes], s.dev[fb], 0); err != nil {
			return err
		}
	}
	if c.encode != nil {
		if err := d.DtoH(st, s.lens[:4*len(s.live)], s.dLens, 0); err != nil {
			return err
		}
	}
	if c.hasHist {
		if err := d.DtoH(st, s.hist[:len(s.live)*HistBytes], s.dHist, 0); err != nil {
			return err
		}
	}
	if c.nValues > 0 {
		if err := d.DtoH(st, s.values[:c.valueOff(len(s.live), 0)], s.dValues, 0); err != nil {
			return err
		}
	}
	return d.Record(s.ev[d2h+1], st)
}

// waitPrev makes batch s's stream wait for the previous batch's event ev,
// once that batch made mark m (it then recorded ev). A batch on the same
// stream needs no wait: the stream runs in order.
func (e *Executor) waitPrev(s *slot, m, ev int) error {
	s.prevOrd.wait(m)
	if e.isHalted() {
		return errHalted
	}
	if !s.cross {
		return nil
	}
	return e.dev.StreamWait(e.streams[s.stream], s.prevEv[ev])
}

// mark records batch s's event ev on its stream and makes mark m.
func (e *Executor) mark(s *slot, m, ev int) error {
	if err := e.dev.Record(s.ev[ev], e.streams[s.stream]); err != nil {
		return err
	}
	s.ord.reach(m)
	return nil
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
		for _, st := range e.allStreams() {
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
	e.allocStop() // no batch comes: the slots not yet allocated are not needed
	e.unwatch()
}

// complete waits for a batch (and, with an encoding last op, brings its
// files' bytes), accounts and traces it, and delivers its results.
func (e *Executor) complete(s *slot) error {
	d := e.dev
	if err := d.WaitEvent(s.ev[evD2H(len(s.calls))+1]); err != nil {
		return err
	}
	errs := make([]error, len(s.live)) // per image: its decode's, or its encoder's
	for i, k := range s.decIdx {
		if k >= 0 {
			errs[i] = s.dec.Images[k].Err
		}
	}
	var fileLens []int
	if e.chain.encode != nil {
		var err error
		if fileLens, err = e.fetchFiles(s, errs); err != nil {
			return err
		}
	}
	if err := e.account(s, errs, fileLens); err != nil {
		return err
	}

	e.mu.Lock()
	s.held = len(s.live)
	e.mu.Unlock()
	fb := e.chain.finalBuf()
	for i, r := range s.live {
		l := r.lay
		res := &Result{Tag: r.tag, In: l.shapes[0], Err: errs[i], e: e, s: s}
		if r.file != nil {
			res.Decoder = r.file.Decoder
		}
		off := l.offs[len(l.offs)-1]
		switch {
		case res.Err != nil:
		case fileLens != nil:
			res.Encoded = s.out[off : off+fileLens[i] : off+fileLens[i]]
		case fb < 0:
			res.Image = r.img // ReserveFile refuses files when no op makes an image
		default:
			out := l.shapes[len(l.shapes)-1]
			res.Image = &stages.Image{W: out.W, H: out.H, C: out.C, Stride: out.W * out.C,
				Pix: s.out[off : off+out.Bytes() : off+out.Bytes()]}
		}
		if e.chain.hasHist && res.Err == nil {
			h := new([256]uint64)
			b := s.hist[i*HistBytes : (i+1)*HistBytes]
			for k := range h {
				h[k] = binary.LittleEndian.Uint64(b[8*k:])
			}
			res.Hist = h
		}
		if n := e.chain.nValues; n > 0 && res.Err == nil {
			res.Values = make([]float32, n)
			for k := range res.Values {
				off := e.chain.valueOff(i, k)
				res.Values[k] = math.Float32frombits(binary.LittleEndian.Uint32(s.values[off:]))
			}
		}
		e.results <- res // results has room for every slot's images
	}
	return nil
}

// fetchFiles reads the lengths the encoder wrote, checks each against its
// bound (an image over it gets an error in errs), and copies each file's
// bytes on the files' stream: only the bytes, not the bound. It returns the
// lengths.
func (e *Executor) fetchFiles(s *slot, errs []error) ([]int, error) {
	d, fs := e.dev, e.fileStream
	n := len(s.calls)
	lens := make([]int, len(s.live))
	fb := e.chain.finalBuf()
	if err := d.Record(s.ev[evD2H(n)+2], fs); err != nil {
		return nil, err
	}
	for i, r := range s.live {
		if errs[i] != nil {
			continue
		}
		l := r.lay
		bound := e.chain.fileBound(l.shapes)
		v := int64(binary.LittleEndian.Uint32(s.lens[4*i:]))
		if v < 1 || v > int64(bound) {
			errs[i] = fmt.Errorf("%w: the %s encoder gave a length of %d bytes, its bound is %d", ErrEncoderBound, e.chain.encode.Format, v, bound)
			continue
		}
		lens[i] = int(v)
		off := l.offs[len(l.offs)-1]
		if err := d.DtoH(fs, s.out[off:off+lens[i]], s.dev[fb], off); err != nil {
			return nil, err
		}
		s.outBytes += lens[i]
	}
	if err := d.Record(s.ev[evD2H(n)+3], fs); err != nil {
		return nil, err
	}
	return lens, d.WaitEvent(s.ev[evD2H(n)+3])
}

// account times a completed batch by its events, adds it to Stats and traces
// it.
func (e *Executor) account(s *slot, errs []error, fileLens []int) error {
	d := e.dev
	for i, ev := range s.ev {
		t, err := d.Elapsed(e.base, ev)
		if err != nil {
			return err
		}
		s.at[i] = t
	}
	for k, p := range e.phases {
		t, err := d.Elapsed(s.ev[p.start], s.ev[p.end])
		if err != nil {
			return err
		}
		s.dur[k] = t
	}
	b := batchStats{images: len(s.live), files: len(s.dec.Images), h2dBytes: int64(s.inBytes + e.tabBytes),
		d2hBytes: int64(s.outBytes)}
	for i, l := range s.layouts {
		b.pixels += int64(l.shapes[0].W) * int64(l.shapes[0].H)
		if s.decIdx[i] >= 0 {
			b.fileBytes += int64(len(s.dec.Images[s.decIdx[i]].Data))
			if errs[i] != nil && s.dec.Images[s.decIdx[i]].Err != nil {
				b.decodeFailed++
			}
		}
	}
	if e.chain.hasHist {
		b.d2hBytes += int64(len(s.live) * HistBytes)
	}
	b.d2hBytes += int64(e.chain.valueOff(len(s.live), 0))
	if e.chain.encode != nil {
		b.d2hBytes += int64(4 * len(s.live))
	}
	e.statsMu.Lock()
	e.stats.add(s.at[evH2DStart], s.at[len(s.at)-1], e.phases, s.dur, b)
	e.statsMu.Unlock()
	if e.trace != nil {
		e.traceBatch(s, b)
	}
	return nil
}

func (e *Executor) traceBatch(s *slot, b batchStats) {
	track := e.streamTracks[s.stream]
	n := len(s.live)
	for k, p := range e.phases {
		name, args := "", map[string]any{"batch": s.seq, "images": n}
		switch p.kind {
		case phaseH2D:
			name, args["bytes"] = "H2D", s.inBytes+e.tabBytes
		case phaseDecode:
			if b.files == 0 {
				continue
			}
			name, args["images"], args["bytes"], args["failed"] = "decode", b.files, b.fileBytes, b.decodeFailed
		case phaseD2H:
			name, args["bytes"] = "D2H", b.d2hBytes
			if e.chain.encode != nil {
				args["bytes"] = b.d2hBytes - int64(s.outBytes) // lengths and histograms
			}
			if p.start == evD2H(len(s.calls))+2 {
				name, args["bytes"] = "D2H files", s.outBytes
			}
		default:
			name = s.calls[p.op].Op.String()
		}
		e.trace.Span(track, name, e.hostBase.Add(s.at[p.start]), s.dur[k], args)
	}
}
