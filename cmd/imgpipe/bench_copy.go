package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"runtime"
	"slices"
	"time"

	"github.com/spf13/cobra"

	"github.com/imgpipe/imgpipe/cudastage"
	"github.com/imgpipe/imgpipe/cudastage/sched"
)

func newBenchCopyCmd(f *benchFlags, stdout, stderr io.Writer) *cobra.Command {
	return &cobra.Command{
		Use:   "copy [flags]",
		Short: "Page-locked and pageable copy bandwidth, and a one-batch profile of the chain",
		Long: `Measure what bounds a GPU pipeline before any kernel runs:

  bandwidth  H2D and D2H, from page-locked memory (async copies timed by CUDA events)
             and from ordinary pageable memory (synchronous copies timed on the host),
             for one --size RGB frame, one batch of them (each --batch value) and 128 MiB;
             the median of --repeats copies after one warm-up copy.
  profile    one batch of --batch frames (the first value) through the chain on one
             stream, as the executor runs it: allocating the slot (page-locked and device
             memory, streams, events), then H2D, each kernel and D2H timed by CUDA events,
             the device wall, the host wall from submission to results, and freeing. The
             first (cold) batch and a second (warm) one are shown side by side.

Page-locked H2D bandwidth ÷ 3 bytes per input pixel is the copy limit that 'bench raw'
reports fractions of. This mode needs a GPU.`,
		Example: `  imgpipe bench copy
  imgpipe bench copy --batch 16,32 --size 3840x2160 --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := f.settings(cmd, stderr)
			if err != nil {
				return err
			}
			return runBenchCopy(cmd.Context(), s, stdout, stderr)
		},
	}
}

// copyRow is the bandwidth measured at one size, in bytes per second.
type copyRow struct {
	Bytes       int     `json:"bytes"`
	PinnedH2D   float64 `json:"pinned_h2d_gb_per_s"`
	PinnedD2H   float64 `json:"pinned_d2h_gb_per_s"`
	PageableH2D float64 `json:"pageable_h2d_gb_per_s"`
	PageableD2H float64 `json:"pageable_d2h_gb_per_s"`
}

// batchProfile is one batch through the chain on one stream.
type batchProfile struct {
	Alloc, Free time.Duration
	// Cold is the first batch, Warm the second; Host is the host wall of each, from the
	// first Reserve to the last result.
	Cold, Warm         sched.Stats
	ColdHost, WarmHost time.Duration
}

// copyRecord is `bench copy --json`'s one line.
type copyRecord struct {
	System  string    `json:"system"`
	Mode    string    `json:"mode"`
	Device  string    `json:"device"`
	Chain   string    `json:"chain"`
	Width   int       `json:"width"`
	Height  int       `json:"height"`
	Batch   int       `json:"batch"`
	Repeats int       `json:"repeats"`
	Copies  []copyRow `json:"copies"`
	// CopyLimit is the largest size's page-locked H2D ÷ 3, in MP/s.
	CopyLimit float64        `json:"copy_limit_mpix_per_s"`
	Profile   map[string]any `json:"profile"`
	Imgpipe   string         `json:"imgpipe"`
}

// measurePageable times synchronous copies of an n-byte Go buffer of random data each way
// on the host clock, after one warm-up copy each way, taking the median of reps.
func measurePageable(dev sched.Device, n, reps int) (bw sched.Bandwidth, err error) {
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
		med := medianDuration(ts)
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

// profileBatch runs two batches of batch frames from pool through ops on one stream and
// one slot, timing the allocation, each batch's phases, and the freeing.
func profileBatch(ctx context.Context, dev sched.Device, ops []sched.Op, pool *rawPool, batch int) (p batchProfile, err error) {
	frameBytes := pool.w * pool.h * 3
	step := (frameBytes + sched.Align - 1) &^ (sched.Align - 1)
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

// copySizes are the sizes bandwidth is measured at: a frame, each batch, and 128 MiB.
func copySizes(frameBytes int, batches []int) []int {
	sizes := []int{frameBytes}
	for _, b := range batches {
		if int64(b)*int64(frameBytes) <= 1<<32 {
			sizes = append(sizes, b*frameBytes)
		}
	}
	sizes = append(sizes, benchCopyLimitBytes)
	slices.Sort(sizes)
	return slices.Compact(sizes)
}

func runBenchCopy(ctx context.Context, s *benchSettings, stdout, stderr io.Writer) error {
	if s.device == "cpu" {
		return usageError("bench copy measures a GPU's copies; --device cpu leaves nothing to measure")
	}
	if s.trace != "" {
		return usageError("--trace: bench copy records no timeline; use bench raw --trace")
	}
	dev, closeFn, err := benchOpenDevice(s.gpu)
	if errors.Is(err, cudastage.ErrNoSuchGPU) {
		return noSuchGPU(err)
	}
	if err != nil {
		return fatalError("bench copy needs a GPU, and none is usable: %s", reason(err))
	}
	defer closeFn()
	out := newBenchOutput(stdout, stderr, s.json)
	frameBytes := s.w * s.h * 3
	batch := s.batch[0]
	rec := copyRecord{System: "imgpipe", Mode: "copy", Device: dev.Name(), Chain: s.chain.label,
		Width: s.w, Height: s.h, Batch: batch, Repeats: s.repeats}

	out.textf("imgpipe bench copy on %s: GB/s, median of %d copies\n", dev.Name(), s.repeats)
	out.textf("%12s %11s %11s %13s %13s %9s\n", "bytes", "pinned H2D", "pinned D2H", "pageable H2D", "pageable D2H", "pinned/pg")
	for _, n := range copySizes(frameBytes, s.batch) {
		pin, err := sched.MeasureCopy(dev, n, s.repeats)
		if err != nil {
			return benchRunError(ctx, fmt.Errorf("page-locked copies of %d bytes: %w", n, err))
		}
		pg, err := measurePageable(dev, n, s.repeats)
		if err != nil {
			return benchRunError(ctx, fmt.Errorf("pageable copies of %d bytes: %w", n, err))
		}
		row := copyRow{Bytes: n, PinnedH2D: pin.H2D / 1e9, PinnedD2H: pin.D2H / 1e9, PageableH2D: pg.H2D / 1e9, PageableD2H: pg.D2H / 1e9}
		rec.Copies = append(rec.Copies, row)
		out.textf("%12d %11.1f %11.1f %13.1f %13.1f %8.1fx\n", n, row.PinnedH2D, row.PinnedD2H, row.PageableH2D, row.PageableD2H, pin.H2D/pg.H2D)
		rec.CopyLimit = pin.H2D / 3 / 1e6
	}
	out.textf("copy limit: %s MP/s (page-locked H2D of %d bytes ÷ 3 bytes per input pixel)\n\n", fmtRate(rec.CopyLimit), benchCopyLimitBytes)

	pool := randomPool(s.w, s.h, min(batch, 16), 1)
	p, err := profileBatch(ctx, dev, s.chain.ops, pool, batch)
	if err != nil {
		return benchRunError(ctx, fmt.Errorf("profile: %w", err))
	}
	out.textf("one batch of %d %dx%d frames through %q, 1 stream (ms):\n", batch, s.w, s.h, s.chain.spec)
	out.textf("%-28s %9s %9s\n", "phase", "cold", "warm")
	out.textf("%-28s %9s\n", "alloc (slot, stream, events)", fmtMs(p.Alloc))
	gbps := func(bytes int64, d time.Duration) string {
		if d <= 0 {
			return ""
		}
		return fmt.Sprintf("  (%.1f GB/s)", float64(bytes)/d.Seconds()/1e9)
	}
	out.textf("%-28s %9s %9s%s\n", fmt.Sprintf("H2D (%d bytes)", p.Warm.H2DBytes), fmtMs(p.Cold.H2D), fmtMs(p.Warm.H2D), gbps(p.Warm.H2DBytes, p.Warm.H2D))
	for i, op := range p.Warm.Ops {
		out.textf("%-28s %9s %9s\n", "  "+op.Op, fmtMs(p.Cold.Ops[i].Total), fmtMs(op.Total))
	}
	out.textf("%-28s %9s %9s\n", "kernels", fmtMs(p.Cold.Kernels), fmtMs(p.Warm.Kernels))
	out.textf("%-28s %9s %9s%s\n", fmt.Sprintf("D2H (%d bytes)", p.Warm.D2HBytes), fmtMs(p.Cold.D2H), fmtMs(p.Warm.D2H), gbps(p.Warm.D2HBytes, p.Warm.D2H))
	out.textf("%-28s %9s %9s\n", "device wall", fmtMs(p.Cold.Wall), fmtMs(p.Warm.Wall))
	out.textf("%-28s %9s %9s\n", "host wall (fill to results)", fmtMs(p.ColdHost), fmtMs(p.WarmHost))
	out.textf("%-28s %9s\n", "free", fmtMs(p.Free))

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
	if out.records != nil {
		rec.Imgpipe = version
		if err := writeJSONLine(out.records, rec); err != nil {
			return fatalError("writing the record: %v", err)
		}
	}
	return nil
}
