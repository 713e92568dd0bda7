package sched

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync/atomic"
	"time"
)

// RawOptions sets up RunRaw.
type RawOptions struct {
	Width, Height int // frame size; frames are RGB
	Frames        int // frames timed
	// Warmup frames run first and are not counted (default: two rounds of
	// every slot, which also writes every slot's random frames).
	Warmup int
	Seed   uint64 // of the random frames
}

// RawStats is what RunRaw measured over the timed frames.
type RawStats struct {
	Frames int
	Pixels int64
	// Wall is host time from the first timed frame's Reserve to its last
	// Result, with the executor already warm.
	Wall time.Duration
	// Device holds the device-timed totals per phase, the device wall and
	// the overlap efficiency of the timed frames.
	Device Stats
}

// GPixelsPerSec is input gigapixels per second of host wall time.
func (r RawStats) GPixelsPerSec() float64 {
	if r.Wall <= 0 {
		return 0
	}
	return float64(r.Pixels) / r.Wall.Seconds() / 1e9
}

// RunRaw measures the engine without decode or save: synthetic random RGB
// frames (never zeros) are written once into the slots' page-locked input
// memory, then frames are pushed through the executor as fast as slots free
// up, each batch still copied in, run through cfg.Ops and copied back, and
// every result released at once. cfg's zero SlotBytes becomes Batch frames
// and its zero Linger "never" (batches are always full, but for the last).
func RunRaw(ctx context.Context, dev Device, cfg Config, opt RawOptions) (RawStats, error) {
	in := Shape{W: opt.Width, H: opt.Height, C: 3}
	if err := checkShape(in); err != nil {
		return RawStats{}, fmt.Errorf("raw frames: %w", err)
	}
	if opt.Frames < 1 {
		return RawStats{}, fmt.Errorf("raw frames: %d frames, want at least 1", opt.Frames)
	}
	if cfg.Batch == 0 {
		cfg.Batch = DefaultBatch
	}
	if cfg.SlotBytes == 0 {
		if int64(cfg.Batch)*int64(alignUp(in.Bytes())) > MaxSlotBytes {
			return RawStats{}, fmt.Errorf("raw frames: %d frames of %dx%d exceed a slot's %d bytes", cfg.Batch, in.W, in.H, int64(MaxSlotBytes))
		}
		cfg.SlotBytes = cfg.Batch * alignUp(in.Bytes())
	}
	if cfg.Linger == 0 {
		cfg.Linger = -1
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	e, err := New(ctx, dev, cfg)
	if err != nil {
		return RawStats{}, err
	}
	warm := opt.Warmup
	if warm <= 0 {
		warm = 2 * e.cfg.Slots * e.cfg.Batch
	}

	var got atomic.Int64
	warmDone := make(chan struct{})
	var last atomic.Int64 // UnixNano of the last result
	consumed := make(chan struct{})
	go func() {
		defer close(consumed)
		for r := range e.Results() {
			r.Release()
			last.Store(time.Now().UnixNano())
			if got.Add(1) == int64(warm) {
				close(warmDone)
			}
		}
	}()

	rng := rand.New(rand.NewPCG(opt.Seed, 0x9e3779b97f4a7c15))
	step := alignUp(in.Bytes())
	push := func(n int) error {
		for range n {
			r, err := e.Reserve(ctx, in.W, in.H, in.C, nil)
			if err != nil {
				return err
			}
			// Frames are written once per place in a slot: later batches in
			// that slot reuse the random pixels already there. The frame
			// position is its offset, all frames having one size.
			if k := r.lay.offs[0] / step; k >= r.s.rawFills {
				fillRandom(r.img.Pix, rng)
				r.s.rawFills = k + 1
			}
			r.Commit()
		}
		return nil
	}
	fail := func(err error) (RawStats, error) {
		cancel()
		<-consumed
		if werr := e.Wait(); werr != nil && !errors.Is(werr, context.Canceled) {
			err = werr // the device's error explains a failed Reserve best
		}
		return RawStats{}, errors.Join(err, e.Close())
	}

	if err := push(warm); err != nil {
		return fail(err)
	}
	e.Flush()
	select {
	case <-warmDone:
	case <-ctx.Done():
		return fail(context.Cause(ctx))
	case <-consumed:
		return fail(fmt.Errorf("executor stopped during warm-up: %w", e.Wait()))
	}
	e.ResetStats()
	start := time.Now()
	if err := push(opt.Frames); err != nil {
		return fail(err)
	}
	e.CloseInput()
	<-consumed
	if err := e.Wait(); err != nil {
		return RawStats{}, errors.Join(err, e.Close())
	}
	if n := got.Load() - int64(warm); n != int64(opt.Frames) {
		return RawStats{}, errors.Join(fmt.Errorf("raw frames: %d of %d frames came back", n, opt.Frames), e.Close())
	}
	st := RawStats{Frames: opt.Frames, Pixels: int64(opt.Frames) * int64(in.W) * int64(in.H),
		Wall: time.Unix(0, last.Load()).Sub(start), Device: e.Stats()}
	return st, e.Close()
}

// fillRandom fills b with pseudo-random bytes.
func fillRandom(b []byte, rng *rand.Rand) {
	for len(b) >= 8 {
		binary.LittleEndian.PutUint64(b, rng.Uint64())
		b = b[8:]
	}
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
}

// Bandwidth is a measured copy rate in bytes per second.
type Bandwidth struct {
	H2D, D2H float64
}

// MeasureCopy measures dev's page-locked copy bandwidth with one n-byte
// buffer of random data: after a warm-up copy each way, reps copies each way
// timed by device events, taking the median.
func MeasureCopy(dev Device, n, reps int) (bw Bandwidth, err error) {
	if n < 1 || reps < 1 {
		return bw, fmt.Errorf("measure copy: %d bytes × %d reps, want at least 1 of each", n, reps)
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := dev.BindThread(); err != nil {
		return bw, err
	}
	var cleanup []func() error
	defer func() {
		for i := len(cleanup) - 1; i >= 0; i-- {
			err = errors.Join(err, cleanup[i]())
		}
	}()
	st, err := dev.NewStream()
	if err != nil {
		return bw, err
	}
	cleanup = append(cleanup, func() error { return dev.DestroyStream(st) })
	var ev [2]Event
	for i := range ev {
		if ev[i], err = dev.NewEvent(); err != nil {
			return bw, err
		}
		e := ev[i]
		cleanup = append(cleanup, func() error { return dev.DestroyEvent(e) })
	}
	host, err := dev.HostAlloc(n)
	if err != nil {
		return bw, err
	}
	cleanup = append(cleanup, func() error { return dev.HostFree(host) })
	fillRandom(host, rand.New(rand.NewPCG(1, 2)))
	d, err := dev.DevAlloc(n)
	if err != nil {
		return bw, err
	}
	cleanup = append(cleanup, func() error { return dev.DevFree(d) })

	copyOnce := func(h2d bool) (time.Duration, error) {
		if err := dev.Record(ev[0], st); err != nil {
			return 0, err
		}
		var err error
		if h2d {
			err = dev.HtoD(st, d, 0, host)
		} else {
			err = dev.DtoH(st, host, d, 0)
		}
		if err != nil {
			return 0, err
		}
		if err := dev.Record(ev[1], st); err != nil {
			return 0, err
		}
		if err := dev.WaitEvent(ev[1]); err != nil {
			return 0, err
		}
		return dev.Elapsed(ev[0], ev[1])
	}
	rate := func(h2d bool) (float64, error) {
		if _, err := copyOnce(h2d); err != nil {
			return 0, err
		}
		ts := make([]time.Duration, reps)
		for i := range ts {
			t, err := copyOnce(h2d)
			if err != nil {
				return 0, err
			}
			ts[i] = t
		}
		slices.Sort(ts)
		med := ts[reps/2]
		if med <= 0 {
			return 0, errors.New("measure copy: copies took no measurable time")
		}
		return float64(n) / med.Seconds(), nil
	}
	if bw.H2D, err = rate(true); err != nil {
		return bw, err
	}
	if bw.D2H, err = rate(false); err != nil {
		return bw, err
	}
	return bw, nil
}
