package bench

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/imgpipe/imgpipe/cudastage/sched"
	"github.com/imgpipe/imgpipe/stages"
)

// rawAll runs one configuration of Raw on Device and every one of Others at once, each GPU
// with its own executor and cfg.Frames frames per run (raw frames are a static split: the
// work stealing of a pipeline run is measured by bench files), and returns the record of
// them together: Frames is every GPU's frames, run i takes the slowest GPU's run i, and
// Scaling is its img/s over one's, the single-GPU record measured just before in the same
// run. check makes each GPU's result check (nil: none), since a CPU chain is not shared.
func (o *Options) rawAll(ctx context.Context, ops []sched.Op, pool *Pool, cfg RunConfig, check func() func(int, *stages.Image, *[256]uint64) error,
	one *Record) (*Record, error) {
	devs := append([]sched.Device{o.Device}, o.Others...)
	results := make([]RunResult, len(devs))
	errs := make([]error, len(devs))
	var wg sync.WaitGroup
	for i, dev := range devs {
		c := cfg
		c.Trace = nil // the timeline is one GPU's, from the single-GPU run
		if check != nil {
			c.Check = check()
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], errs[i] = RunFrames(ctx, dev, ops, pool, c)
		}()
	}
	wg.Wait()
	names := make([]string, len(devs))
	checked, exact := 0, true
	for i, dev := range devs {
		if errs[i] != nil {
			return nil, fmt.Errorf("%s: %w", dev.Name(), errs[i])
		}
		names[i] = dev.Name()
		checked += results[i].Checked
		if results[i].CheckErr != nil {
			exact = false
			o.notice("bench raw: %s: output differs from the CPU chain: %v", dev.Name(), results[i].CheckErr)
		}
	}
	runs := make([]time.Duration, cfg.Repeats)
	for i := range runs {
		for _, res := range results {
			runs[i] = max(runs[i], res.Runs[i])
		}
	}
	r := *one
	r.Device, r.GPUs, r.Frames = strings.Join(names, ", "), len(devs), len(devs)*cfg.Frames
	r.Overlap, r.H2DS, r.KernelsS, r.D2HS, r.DevWallS, r.OpsS, r.Bottleneck = nil, nil, nil, nil, nil, nil, ""
	r.CopyLimit, r.Fraction, r.H2DGBs, r.D2HGBs, r.CPUMpixPerS, r.GPUCPURatio = nil, nil, nil, nil, nil, nil
	r.setTimes(runs, r.Frames, float64(r.Frames)*float64(pool.w)*float64(pool.h))
	r.Exact = exact && checked > 0
	r.Note = fmt.Sprintf("%d GPUs at once, %d frames each per run; a run's time is the slowest GPU's; exact: %d results compared with the CPU chain",
		len(devs), cfg.Frames, checked)
	if check == nil {
		r.Note = fmt.Sprintf("%d GPUs at once, %d frames each per run; a run's time is the slowest GPU's; not checked", len(devs), cfg.Frames)
	}
	if one.ImgPerS > 0 {
		r.Scaling = ptr(r.ImgPerS / one.ImgPerS)
	}
	return &r, nil
}
