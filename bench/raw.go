package bench

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"runtime"

	"github.com/imgpipe/imgpipe/cudastage/sched"
	"github.com/imgpipe/imgpipe/pipeline"
	"github.com/imgpipe/imgpipe/stages"
)

// RawConfig are the raw mode's own settings.
type RawConfig struct {
	FramesFile string // frames to cycle through (LoadFrames); "" makes PoolSize random ones
	PoolSize   int    // random frames, at most Options.Frames of them
	Seed       uint64 // of the random frames
	MaxPoolMB  int    // refuse a pool (or frames file) larger than this
	Pageable   bool   // slots in ordinary memory (RunConfig.Pageable)
	NoCPU      bool   // with a GPU, skip the CPU run that gives the GPU/CPU ratio
	CPUFrames  int    // frames per CPU run with a GPU; 0: 8 per worker (at most Options.Frames)
	Workers    int    // CPU worker goroutines; 0: one per core
}

// Pool checks c against o and makes the frames a raw run of o cycles through. Every error
// is an *OptionError.
func (c *RawConfig) Pool(o *Options) (*Pool, error) {
	var errs []error
	if o.Frames < 1 {
		errs = append(errs, fmt.Errorf("--frames %d: raw mode times at least 1 frame", o.Frames))
	}
	if c.PoolSize < 1 {
		errs = append(errs, fmt.Errorf("--pool %d: want at least 1", c.PoolSize))
	}
	if c.MaxPoolMB < 1 || c.MaxPoolMB > MaxPoolMB {
		errs = append(errs, fmt.Errorf("--max-pool-mb %d out of range [1, %d]", c.MaxPoolMB, MaxPoolMB))
	}
	if c.CPUFrames < 0 || c.CPUFrames > MaxFrames {
		errs = append(errs, fmt.Errorf("--cpu-frames %d out of range [0, %d]", c.CPUFrames, MaxFrames))
	}
	if err := pipeline.CheckSetting("workers", c.Workers); err != nil {
		errs = append(errs, fmt.Errorf("--workers: %w", err))
	}
	if len(errs) > 0 {
		return nil, &OptionError{Err: pipeline.ErrorList(errs)}
	}
	maxBytes := int64(c.MaxPoolMB) << 20
	if c.FramesFile != "" {
		p, err := LoadFrames(c.FramesFile, o.Width, o.Height, maxBytes)
		if err != nil {
			return nil, optionErrorf("--frames-file: %v", err)
		}
		return p, nil
	}
	n := min(c.PoolSize, o.Frames)
	if need := int64(n) * int64(o.Width) * int64(o.Height) * 3; need > maxBytes {
		return nil, optionErrorf("a pool of %d %dx%d frames needs %d MiB, over --max-pool-mb %d", n, o.Width, o.Height, need>>20, c.MaxPoolMB)
	}
	return RandomPool(o.Width, o.Height, n, c.Seed), nil
}

// Raw times o.Chain on pool's frames: on the CPU (without a GPU, or unless c.NoCPU), then
// on o.Device for every combination of o.Streams and o.Batch, through RunFrames. With a GPU
// it first measures the page-locked copy bandwidth: each input pixel costs 3 bytes of H2D,
// so H2D bytes/s ÷ 3 is the copy limit each GPU result gives its fraction of. Each result
// goes to o.Record as soon as it is measured, and a line of the table to o.Text.
func Raw(ctx context.Context, o Options, c RawConfig, pool *Pool) error {
	workers := c.Workers
	if workers == 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	o.textf("imgpipe bench raw: %dx%d RGB (%s), chain %q\n", o.Width, o.Height, pool.source, o.Chain.Spec)
	o.textf("%d frames per run, median of %d runs after %d warm-up runs\n", o.Frames, o.Repeats, o.Warmup)

	base := Record{Mode: "raw", Chain: o.Chain.Label, Width: ptr(o.Width), Height: ptr(o.Height), Frames: o.Frames}
	pixels := float64(o.Frames) * float64(o.Width) * float64(o.Height)

	// CPU: the only run without a GPU, the ratio's denominator with one, and the reference
	// each GPU result is checked against; a chain with a GPU-only stage (kernel) has none.
	noCPU := o.Chain.plan.CheckCPU()
	if noCPU != nil && o.Device == nil {
		return &OptionError{Err: noCPU}
	}
	var cpuRec *Record
	if noCPU == nil && (o.Device == nil || !c.NoCPU) {
		n := o.Frames
		if o.Device != nil {
			n = c.CPUFrames
			if n == 0 {
				n = 8 * workers
			}
			n = min(n, o.Frames)
		}
		runs, err := runCPU(ctx, o.Chain, pool, n, workers, o.Warmup, o.Repeats)
		if err != nil {
			return err
		}
		r := base
		r.System, r.Device, r.Frames, r.Threads = "imgpipe-cpu", cpuName(), n, workers
		r.Exact = true
		r.Note = "the CPU reference implementation (package stages)"
		if o.Device == nil {
			r.Note += "; no GPU"
			if o.NoGPU != "" {
				r.Note += ": " + o.NoGPU
			}
		}
		r.setTimes(runs, n, float64(n)*float64(o.Width)*float64(o.Height))
		cpuRec = &r
		o.textf("CPU, %d workers, %d frames per run: %s img/s, %s MP/s\n", workers, n, fmtRate(r.ImgPerS), fmtRate(r.MpixPerS))
		if err := o.emit(&r); err != nil {
			return err
		}
	}
	if o.Device == nil {
		if o.NoGPU != "" {
			o.textf("no GPU: only the CPU was measured\n")
		}
		if o.Trace != "" {
			o.notice("--trace: the trace shows a GPU's streams; without a GPU none was written")
		}
		return nil
	}

	copyBytes := o.CopyBytes
	if copyBytes == 0 {
		copyBytes = DefaultCopyBytes
	}
	bw, err := MeasureCopy(o.Device, copyBytes, copyReps, cmp.Or(o.CopyWarmup, DefaultCopyWarmup))
	if err != nil {
		return fmt.Errorf("measuring copy bandwidth: %w", err)
	}
	o.textf("%s: page-locked H2D %.1f GB/s, D2H %.1f GB/s; copy limit %s MP/s (H2D ÷ 3 bytes per input pixel)\n",
		o.Device.Name(), bw.H2D/1e9, bw.D2H/1e9, fmtRate(copyLimitMPix(bw)))

	var tr *sched.Trace
	if o.Trace != "" {
		tr = sched.NewTrace("imgpipe bench raw", 0)
	}
	// newCheck makes a result check with its own CPU chain (each GPU of a run over
	// several checks at once); nil when the chain has no CPU implementation.
	var newCheck func() func(frame int, img *stages.Image, hist *[256]uint64) error
	if noCPU == nil {
		newCheck = func() func(frame int, img *stages.Image, hist *[256]uint64) error {
			cpuCheck := o.Chain.newCPU()
			return func(frame int, img *stages.Image, hist *[256]uint64) error {
				want, wantH := cpuCheck.run(pool.image(frame))
				if err := sameImage(img, want); err != nil {
					return err
				}
				if (hist == nil) != (wantH == nil) || (hist != nil && *hist != *wantH) {
					return errors.New("histogram differs from the CPU chain's")
				}
				return nil
			}
		}
	}
	var check func(frame int, img *stages.Image, hist *[256]uint64) error
	if newCheck != nil {
		check = newCheck()
	}
	o.textf("%-7s %5s %9s %8s %6s %7s %8s %8s %8s %8s %7s %s\n",
		"streams", "batch", "img/s", "MP/s", "limit", "overlap", "ΣH2D ms", "Σkern ms", "ΣD2H ms", "wall ms", "GPU/CPU", "bound by")
	for _, streams := range o.Streams {
		for _, batch := range o.frameBatches() {
			cfg := RunConfig{Streams: streams, Batch: batch, Pageable: c.Pageable, Frames: o.Frames,
				Warmup: o.Warmup, Repeats: o.Repeats, Check: check}
			if tr != nil {
				cfg.Trace = tr
			}
			res, err := RunFrames(ctx, o.Device, o.Chain.Ops, pool, cfg)
			if err != nil {
				return fmt.Errorf("streams %d, batch %d: %w", streams, batch, err)
			}
			r := base
			r.System, r.Device, r.Streams, r.Batch = "imgpipe", o.Device.Name(), streams, batch
			r.Pinned = ptr(!c.Pageable)
			if c.Pageable {
				r.System = "imgpipe-pageable"
			}
			r.Exact = res.Checked > 0 && res.CheckErr == nil
			r.Note = fmt.Sprintf("exact: %d results compared with the CPU chain", res.Checked)
			switch {
			case noCPU != nil:
				r.Note = "exact: not checked: " + noCPU.Error()
			case res.CheckErr != nil:
				r.Note = "NOT exact: " + res.CheckErr.Error()
				o.notice("bench raw: streams %d, batch %d: output differs from the CPU chain: %v", streams, batch, res.CheckErr)
			}
			r.setTimes(res.Runs, o.Frames, pixels)
			r.setDevice(res.Stats)
			r.setLimit(&bw)
			if cpuRec != nil && cpuRec.MpixPerS > 0 {
				r.CPUMpixPerS = ptr(cpuRec.MpixPerS)
				r.GPUCPURatio = ptr(r.MpixPerS / cpuRec.MpixPerS)
			}
			o.row(&r, res.Stats)
			if err := o.emit(&r); err != nil {
				return err
			}
			if len(o.Others) == 0 {
				continue
			}
			all, err := o.rawAll(ctx, o.Chain.Ops, pool, cfg, newCheck, &r)
			if err != nil {
				return fmt.Errorf("streams %d, batch %d on %d GPUs: %w", streams, batch, len(o.Others)+1, err)
			}
			scaling := "-"
			if all.Scaling != nil {
				scaling = fmt.Sprintf("%.2fx one GPU", *all.Scaling)
			}
			o.textf("%-7d %5d %9s %8s   on %d GPUs at once: %s\n", streams, batch, fmtRate(all.ImgPerS), fmtRate(all.MpixPerS), all.GPUs, scaling)
			if err := o.emit(all); err != nil {
				return err
			}
		}
	}
	return o.writeTrace(tr, "; open in ui.perfetto.dev")
}

// row writes one GPU configuration's line of the raw table.
func (o *Options) row(r *Record, st sched.Stats) {
	frac, ratio := "-", "-"
	if r.Fraction != nil {
		frac = fmt.Sprintf("%.0f%%", 100**r.Fraction)
	}
	if r.GPUCPURatio != nil {
		ratio = fmtRate(*r.GPUCPURatio) + "x"
	}
	o.textf("%-7d %5d %9s %8s %6s %7.2f %8s %8s %8s %8s %7s %s\n",
		r.Streams, r.Batch, fmtRate(r.ImgPerS), fmtRate(r.MpixPerS), frac, st.Overlap(),
		fmtMs(st.H2D), fmtMs(st.Kernels), fmtMs(st.D2H), fmtMs(st.Wall), ratio, st.Bottleneck())
}
