package bench

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"time"

	"github.com/imgpipe/imgpipe/cudastage/sched"
)

// Bandwidth is a measured copy rate in bytes per second.
type Bandwidth struct {
	H2D, D2H float64 // host to device, device to host
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

// MeasureCopy measures dev's page-locked copy bandwidth with one n-byte buffer of random
// data: after copying each way for warm (at least once), reps copies each way timed by
// device events, taking the median.
func MeasureCopy(dev sched.Device, n, reps int, warm time.Duration) (bw Bandwidth, err error) {
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
	var ev [2]sched.Event
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
		for t0 := time.Now(); ; {
			if _, err := copyOnce(h2d); err != nil {
				return 0, err
			}
			if time.Since(t0) >= warm {
				break
			}
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

// measurePageable times synchronous copies of an n-byte Go buffer of random data each way
// on the host clock, after one warm-up copy each way, taking the median of reps.
func measurePageable(dev sched.Device, n, reps int) (bw Bandwidth, err error) {
	if n < 1 || reps < 1 {
		return bw, fmt.Errorf("measure pageable copy: %d bytes × %d reps, want at least 1 of each", n, reps)
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := dev.BindThread(); err != nil {
		return bw, err
	}
	st, err := dev.NewStream()
	if err != nil {
		return bw, err
	}
	defer func() { err = errors.Join(err, dev.DestroyStream(st)) }()
	d, err := dev.DevAlloc(n)
	if err != nil {
		return bw, err
	}
	defer func() { err = errors.Join(err, dev.DevFree(d)) }()
	host := make([]byte, n)
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range host {
		host[i] = byte(rng.Uint32())
	}
	rate := func(h2d bool) (float64, error) {
		ts := make([]time.Duration, 0, reps)
		for i := range reps + 1 {
			t0 := time.Now()
			var err error
			if h2d {
				err = dev.HtoD(st, d, 0, host)
			} else {
				err = dev.DtoH(st, host, d, 0)
			}
			if err == nil {
				err = dev.SyncStream(st)
			}
			if err != nil {
				return 0, err
			}
			if i > 0 { // the first copy warms up
				ts = append(ts, time.Since(t0))
			}
		}
		med := median(ts)
		if med <= 0 {
			return 0, errors.New("measure pageable copy: copies took no measurable time")
		}
		return float64(n) / med.Seconds(), nil
	}
	if bw.H2D, err = rate(true); err != nil {
		return bw, err
	}
	bw.D2H, err = rate(false)
	return bw, err
}

// batchProfile is one batch through the chain on one stream.
type batchProfile struct {
	Alloc, Free time.Duration
	// Cold is the first batch, Warm the second; Host is the host wall of each, from the
	// first Reserve to the last result.
	Cold, Warm         sched.Stats
	ColdHost, WarmHost time.Duration
}

// profileBatch runs two batches of batch frames from pool through ops on one stream and
// one slot, timing the allocation, each batch's phases, and the freeing.
func profileBatch(ctx context.Context, dev sched.Device, ops []sched.Op, pool *Pool, batch int) (p batchProfile, err error) {
	frameBytes := pool.w * pool.h * 3
	step := sched.AlignUp(frameBytes)
	if int64(step)*int64(batch) > sched.MaxSlotBytes {
		return p, fmt.Errorf("batch %d of %dx%d frames exceeds a slot's %d bytes", batch, pool.w, pool.h, int64(sched.MaxSlotBytes))
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	t0 := time.Now()
	e, err := sched.New(ctx, dev, sched.Config{Ops: ops, Streams: 1, Slots: 1, Batch: batch, SlotBytes: batch * step, Linger: -1})
	if err != nil {
		return p, err
	}
	p.Alloc = time.Since(t0)
	closed := false
	defer func() {
		if !closed {
			cancel()
			err = errors.Join(err, e.Close())
		}
	}()
	one := func() (time.Duration, error) {
		e.ResetStats()
		start := time.Now()
		for i := range batch {
			r, err := e.Reserve(ctx, pool.w, pool.h, 3, nil)
			if err != nil {
				return 0, err
			}
			copy(r.Image().Pix, pool.frames[i%len(pool.frames)])
			r.Commit()
		}
		e.Flush()
		for range batch {
			select {
			case r, ok := <-e.Results():
				if !ok {
					return 0, fmt.Errorf("executor stopped: %w", e.Wait())
				}
				r.Release()
			case <-ctx.Done():
				return 0, context.Cause(ctx)
			}
		}
		return time.Since(start), nil
	}
	if p.ColdHost, err = one(); err != nil {
		return p, err
	}
	p.Cold = e.Stats()
	if p.WarmHost, err = one(); err != nil {
		return p, err
	}
	p.Warm = e.Stats()
	e.CloseInput()
	if err := e.Wait(); err != nil {
		return p, err
	}
	t1 := time.Now()
	closed = true
	if err := e.Close(); err != nil {
		return p, err
	}
	p.Free = time.Since(t1)
	return p, nil
}

// CopyRow is the bandwidth measured at one size, in GB/s.
type CopyRow struct {
	Bytes int `json:"bytes"` // the size of one copy
	// From page-locked memory, timed by device events.
	PinnedH2D float64 `json:"pinned_h2d_gb_per_s"`
	PinnedD2H float64 `json:"pinned_d2h_gb_per_s"`
	// From ordinary memory: synchronous copies, timed on the host.
	PageableH2D float64 `json:"pageable_h2d_gb_per_s"`
	PageableD2H float64 `json:"pageable_d2h_gb_per_s"`
}

// CopyRecord is what Copy measured, as `imgpipe bench copy --json` writes it.
type CopyRecord struct {
	System  string    `json:"system"`  // imgpipe
	Mode    string    `json:"mode"`    // copy
	Device  string    `json:"device"`  // the GPU's name
	Chain   string    `json:"chain"`   // Chain.Label of the profiled chain
	Width   int       `json:"width"`   // frame width
	Height  int       `json:"height"`  // frame height
	Batch   int       `json:"batch"`   // the profiled batch
	Repeats int       `json:"repeats"` // copies per median
	Copies  []CopyRow `json:"copies"`  // by size, smallest first
	// CopyLimit is the largest size's page-locked H2D ÷ 3, in MP/s.
	CopyLimit float64 `json:"copy_limit_mpix_per_s"`
	// Profile is the one-batch profile: alloc_ms, free_ms, h2d_bytes, d2h_bytes, and per
	// batch ("cold", "warm") the phases, walls and ops in milliseconds.
	Profile map[string]any `json:"profile"`
	Imgpipe string         `json:"imgpipe"` // the version that measured
}

// copySizes are the sizes bandwidth is measured at: a frame, each batch, and limitBytes.
func copySizes(frameBytes int, batches []int, limitBytes int) []int {
	sizes := []int{frameBytes}
	for _, b := range batches {
		if int64(b)*int64(frameBytes) <= 1<<32 {
			sizes = append(sizes, b*frameBytes)
		}
	}
	sizes = append(sizes, limitBytes)
	slices.Sort(sizes)
	return slices.Compact(sizes)
}

// Copy measures what bounds o.Device before any kernel runs: page-locked and pageable H2D
// and D2H bandwidth for one frame, one batch of each o.Batch and o.CopyBytes (the median of
// o.Repeats copies), then a profile of one batch of o.Batch[0] frames through o.Chain on one
// stream (allocation, H2D, each kernel, D2H, freeing; a cold batch and a warm one). The
// table goes to o.Text.
func Copy(ctx context.Context, o Options) (*CopyRecord, error) {
	dev := o.Device
	if dev == nil {
		return nil, errors.New("bench copy needs a GPU")
	}
	copyBytes := o.CopyBytes
	if copyBytes == 0 {
		copyBytes = DefaultCopyBytes
	}
	frameBytes := o.Width * o.Height * 3
	batches := o.frameBatches()
	batch := batches[0]
	rec := &CopyRecord{System: "imgpipe", Mode: "copy", Device: dev.Name(), Chain: o.Chain.Label,
		Width: o.Width, Height: o.Height, Batch: batch, Repeats: o.Repeats, Imgpipe: o.Version}

	o.textf("imgpipe bench copy on %s: GB/s, median of %d copies\n", dev.Name(), o.Repeats)
	o.textf("%12s %11s %11s %13s %13s %9s\n", "bytes", "pinned H2D", "pinned D2H", "pageable H2D", "pageable D2H", "pinned/pg")
	for _, n := range copySizes(frameBytes, batches, copyBytes) {
		pin, err := MeasureCopy(dev, n, o.Repeats, cmp.Or(o.CopyWarmup, DefaultCopyWarmup))
		if err != nil {
			return nil, fmt.Errorf("page-locked copies of %d bytes: %w", n, err)
		}
		pg, err := measurePageable(dev, n, o.Repeats)
		if err != nil {
			return nil, fmt.Errorf("pageable copies of %d bytes: %w", n, err)
		}
		row := CopyRow{Bytes: n, PinnedH2D: pin.H2D / 1e9, PinnedD2H: pin.D2H / 1e9, PageableH2D: pg.H2D / 1e9, PageableD2H: pg.D2H / 1e9}
		rec.Copies = append(rec.Copies, row)
		o.textf("%12d %11.1f %11.1f %13.1f %13.1f %8.1fx\n", n, row.PinnedH2D, row.PinnedD2H, row.PageableH2D, row.PageableD2H, pin.H2D/pg.H2D)
		rec.CopyLimit = pin.H2D / 3 / 1e6
	}
	o.textf("copy limit: %s MP/s (page-locked H2D of %d bytes ÷ 3 bytes per input pixel)\n\n", fmtRate(rec.CopyLimit), copyBytes)

	pool := RandomPool(o.Width, o.Height, min(batch, 16), 1)
	p, err := profileBatch(ctx, dev, o.Chain.Ops, pool, batch)
	if err != nil {
		return nil, fmt.Errorf("profile: %w", err)
	}
	o.textf("one batch of %d %dx%d frames through %q, 1 stream (ms):\n", batch, o.Width, o.Height, o.Chain.Spec)
	o.textf("%-28s %9s %9s\n", "phase", "cold", "warm")
	o.textf("%-28s %9s\n", "alloc (slot, stream, events)", fmtMs(p.Alloc))
	gbps := func(bytes int64, d time.Duration) string {
		if d <= 0 {
			return ""
		}
		return fmt.Sprintf("  (%.1f GB/s)", float64(bytes)/d.Seconds()/1e9)
	}
	o.textf("%-28s %9s %9s%s\n", fmt.Sprintf("H2D (%d bytes)", p.Warm.H2DBytes), fmtMs(p.Cold.H2D), fmtMs(p.Warm.H2D), gbps(p.Warm.H2DBytes, p.Warm.H2D))
	for i, op := range p.Warm.Ops {
		o.textf("%-28s %9s %9s\n", "  "+op.Op, fmtMs(p.Cold.Ops[i].Total), fmtMs(op.Total))
	}
	o.textf("%-28s %9s %9s\n", "kernels", fmtMs(p.Cold.Kernels), fmtMs(p.Warm.Kernels))
	o.textf("%-28s %9s %9s%s\n", fmt.Sprintf("D2H (%d bytes)", p.Warm.D2HBytes), fmtMs(p.Cold.D2H), fmtMs(p.Warm.D2H), gbps(p.Warm.D2HBytes, p.Warm.D2H))
	o.textf("%-28s %9s %9s\n", "device wall", fmtMs(p.Cold.Wall), fmtMs(p.Warm.Wall))
	o.textf("%-28s %9s %9s\n", "host wall (fill to results)", fmtMs(p.ColdHost), fmtMs(p.WarmHost))
	o.textf("%-28s %9s\n", "free", fmtMs(p.Free))

	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	prof := map[string]any{"alloc_ms": ms(p.Alloc), "free_ms": ms(p.Free),
		"h2d_bytes": p.Warm.H2DBytes, "d2h_bytes": p.Warm.D2HBytes}
	for name, st := range map[string]sched.Stats{"cold": p.Cold, "warm": p.Warm} {
		ops := map[string]float64{}
		for _, o := range st.Ops {
			ops[o.Op] = ms(o.Total)
		}
		host := p.ColdHost
		if name == "warm" {
			host = p.WarmHost
		}
		prof[name] = map[string]any{"h2d_ms": ms(st.H2D), "kernels_ms": ms(st.Kernels), "d2h_ms": ms(st.D2H),
			"device_wall_ms": ms(st.Wall), "host_wall_ms": ms(host), "ops_ms": ops}
	}
	rec.Profile = prof
	return rec, nil
}
