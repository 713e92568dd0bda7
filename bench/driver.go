package bench

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/imgpipe/imgpipe/cudastage/sched"
	"github.com/imgpipe/imgpipe/pipeline/gpu"
	"github.com/imgpipe/imgpipe/stages"
)

// RunConfig is one configuration of RunFrames.
type RunConfig struct {
	Streams, Batch  int          // device streams, and frames per batch
	Pageable        bool         // slots in ordinary memory: synchronous copies, no overlap
	Frames          int          // per timed run, at least 1
	Warmup, Repeats int          // untimed and timed runs of Frames; at least 1 timed run
	Trace           sched.Tracer // receives the spans of the last timed run; nil: none
	// Check, when set, compares the first and last result of the first batch with the CPU
	// chain on the same frame.
	Check func(frame int, img *stages.Image, hist *[256]uint64) error
}

// RunResult is what RunFrames measured.
type RunResult struct {
	Runs     []time.Duration // host wall of each timed run
	Stats    sched.Stats     // device stats of the median run
	Checked  int             // results compared by RunConfig.Check
	CheckErr error           // the first difference found, nil when every compared result matched
}

// rawTag follows a frame through the executor: which pool frame its slot place holds.
type rawTag struct{ frame int }

// RunFrames is the raw-frame driver: it pushes pool's frames through an executor on dev
// running ops, with as many slots of Batch frames as a GPU run has (gpu.DefaultSlots)
// and batches that never linger. First a priming pass of two rounds of every slot writes the
// pool into every slot place (each place gets the next frame of the pool once, and later
// batches reuse the frames in place, as the peers cycle through their pool) and checks the
// first batch; then cfg.Warmup untimed runs, then cfg.Repeats timed runs of cfg.Frames
// frames. Each run's time is host wall from its first Reserve to its last result; the device
// stats are reset before each run, and those of the median run are kept. Tracing covers the
// last timed run only.
func RunFrames(ctx context.Context, dev sched.Device, ops []sched.Op, pool *Pool, cfg RunConfig) (res RunResult, err error) {
	switch {
	case pool.w < 1 || pool.h < 1 || len(pool.frames) == 0:
		return res, fmt.Errorf("raw frames: %d frames of %dx%d, want at least one of at least 1x1", len(pool.frames), pool.w, pool.h)
	case cfg.Frames < 1 || cfg.Repeats < 1 || cfg.Warmup < 0:
		return res, fmt.Errorf("raw frames: %d frames, %d warm-up and %d timed runs; want at least 1 frame and 1 timed run", cfg.Frames, cfg.Warmup, cfg.Repeats)
	}
	frameBytes := pool.w * pool.h * 3
	step := sched.AlignUp(frameBytes)
	if int64(step)*int64(cfg.Batch) > sched.MaxSlotBytes {
		return res, fmt.Errorf("batch %d of %dx%d frames exceeds a slot's %d bytes", cfg.Batch, pool.w, pool.h, int64(sched.MaxSlotBytes))
	}
	var gate *gatedTracer
	scfg := sched.Config{Ops: ops, Streams: cfg.Streams, Slots: gpu.DefaultSlots(cfg.Streams), Batch: cfg.Batch,
		SlotBytes: cfg.Batch * step, Linger: -1, Pageable: cfg.Pageable}
	if cfg.Trace != nil {
		gate = &gatedTracer{t: cfg.Trace}
		scfg.Trace = gate
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	e, err := sched.New(ctx, dev, scfg)
	if err != nil {
		return res, err
	}

	var (
		got, target atomic.Int64
		last        atomic.Int64 // UnixNano of the latest result
		reached     = make(chan struct{}, 1)
		consumed    = make(chan struct{})
		checkErr    error // written by the consumer before it signals reached
		checked     int
	)
	target.Store(-1)
	firstBatch := int64(cfg.Batch) // the priming run pushes 2·Slots batches: the first is whole
	go func() {
		defer close(consumed)
		for r := range e.Results() {
			n := got.Load()
			if cfg.Check != nil && (n == 0 || n == firstBatch-1) && checkErr == nil {
				if err := cfg.Check(r.Tag.(*rawTag).frame, r.Image, r.Hist); err != nil {
					checkErr = fmt.Errorf("frame %d: %w", r.Tag.(*rawTag).frame, err)
				}
				checked++
			}
			r.Release()
			last.Store(time.Now().UnixNano())
			if got.Add(1) == target.Load() {
				reached <- struct{}{}
			}
		}
	}()
	finish := func(err error) (RunResult, error) {
		if err != nil {
			cancel()
		} else {
			e.CloseInput()
		}
		<-consumed
		if werr := e.Wait(); werr != nil && !errors.Is(werr, context.Canceled) {
			err = errors.Join(werr, err) // the device's error explains a failed Reserve best
		}
		return res, errors.Join(err, e.Close())
	}

	placed := map[*byte]int{} // slot place → pool frame it holds
	next := 0
	push := func(n int) error {
		for range n {
			tag := &rawTag{}
			r, err := e.Reserve(ctx, pool.w, pool.h, 3, tag)
			if err != nil {
				return err
			}
			pix := r.Image().Pix
			k, ok := placed[&pix[0]]
			if !ok {
				k = next % len(pool.frames)
				next++
				copy(pix, pool.frames[k])
				placed[&pix[0]] = k
			}
			tag.frame = k
			r.Commit()
		}
		return nil
	}
	// run pushes n frames and waits for their results: the host wall of the run.
	run := func(n int) (time.Duration, error) {
		target.Store(got.Load() + int64(n))
		start := time.Now()
		if err := push(n); err != nil {
			return 0, err
		}
		e.Flush()
		select {
		case <-reached:
		case <-consumed:
			return 0, fmt.Errorf("executor stopped: %w", e.Wait())
		case <-ctx.Done():
			return 0, context.Cause(ctx)
		}
		return time.Unix(0, last.Load()).Sub(start), nil
	}

	if _, err := run(2 * scfg.Slots * cfg.Batch); err != nil {
		return finish(err)
	}
	res.Checked, res.CheckErr = checked, checkErr
	for range cfg.Warmup {
		if _, err := run(cfg.Frames); err != nil {
			return finish(err)
		}
	}
	stats := make([]sched.Stats, cfg.Repeats)
	for i := range cfg.Repeats {
		e.ResetStats()
		if gate != nil && i == cfg.Repeats-1 {
			gate.on.Store(true)
		}
		d, err := run(cfg.Frames)
		if gate != nil {
			gate.on.Store(false)
		}
		if err != nil {
			return finish(err)
		}
		res.Runs = append(res.Runs, d)
		stats[i] = e.Stats()
	}
	res.Stats = stats[medianIndex(res.Runs)]
	return finish(nil)
}

// gatedTracer passes spans on only while on, so that a trace holds one timed run.
type gatedTracer struct {
	on atomic.Bool
	t  sched.Tracer
}

// Span passes the span on while g is on.
func (g *gatedTracer) Span(track, name string, start time.Time, d time.Duration, args map[string]any) {
	if g.on.Load() {
		g.t.Span(track, name, start, d, args)
	}
}

// runCPU times the chain on the CPU: frames images per run, spread over workers goroutines
// (each with its own buffers), after warmup untimed runs.
func runCPU(ctx context.Context, chain *Chain, pool *Pool, frames, workers, warmup, repeats int) ([]time.Duration, error) {
	cpus := make([]*cpuChain, workers)
	for i := range cpus {
		cpus[i] = chain.newCPU()
	}
	run := func() error {
		var next atomic.Int64
		var wg sync.WaitGroup
		for _, c := range cpus {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for ctx.Err() == nil {
					i := int(next.Add(1) - 1)
					if i >= frames {
						return
					}
					c.run(pool.image(i))
				}
			}()
		}
		wg.Wait()
		return context.Cause(ctx)
	}
	for range warmup {
		if err := run(); err != nil {
			return nil, err
		}
	}
	var runs []time.Duration
	for range repeats {
		t0 := time.Now()
		if err := run(); err != nil {
			return nil, err
		}
		runs = append(runs, time.Since(t0))
	}
	return runs, nil
}
