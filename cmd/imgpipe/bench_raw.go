package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"

	"github.com/imgpipe/imgpipe/cudastage/sched"
	"github.com/imgpipe/imgpipe/pipeline"
	"github.com/imgpipe/imgpipe/stages"
)

// rawFlags are `bench raw`'s own options.
type rawFlags struct {
	framesFile string
	pool       int
	seed       uint64
	maxPoolMB  int
	pageable   bool
	noCPU      bool
	cpuFrames  int
	workers    int
}

func newBenchRawCmd(f *benchFlags, stdout, stderr io.Writer) *cobra.Command {
	var rf rawFlags
	cmd := &cobra.Command{
		Use:   "raw [flags]",
		Short: "The engine alone: RGB frames in page-locked memory through the GPU executor",
		Long: `Time the engine without decode or save. A pool of RGB frames (random, never zeros, or
read from --frames-file) is written once into the executor's page-locked slots; then
--frames frames per run go through the same multi-stream executor as
'imgpipe run --device cuda': one H2D per batch, the chain's kernels, one D2H of the
results and histograms, every result handed back and released.

At start it measures the GPU's page-locked H2D/D2H bandwidth with one 128 MiB copy
each way (CUDA events, median of 7). Every input pixel is 3 bytes of H2D, so

  copy limit (MP/s) = H2D bytes/s ÷ 3 ÷ 10^6

and each configuration reports the fraction of that limit it reached, and the
overlap efficiency wall ÷ max(ΣH2D, Σkernels, ΣD2H) of its device timeline (1.0:
the busiest engine never waited).

Unless --no-cpu, the same chain also runs on the CPU on --cpu-frames frames with
every core, and each GPU result gives its GPU/CPU ratio measured in this run. Before
timing, the first and last image of the first batch are compared with the CPU
chain ("exact" in the output). --pageable puts the slots in ordinary memory (the
textbook flow, copies synchronous) to measure what page-locked memory gains.

Without a GPU (or with --device cpu) the chain runs on the CPU only.

--frames-file reads the frames the peer benchmarks use, so that every system times
identical inputs:

  python3 bench/peers/common.py --size 1920x1080 --pool 64 --seed 1 --out frames.rgb

Its size must be a whole number of --size RGB frames. Each place in the executor's
slots gets the next frame of the pool once; later batches reuse the frames in place,
as the peers cycle through their pool.`,
		Example: `  imgpipe bench raw --device cuda --streams 2 --batch 16
  imgpipe bench raw --streams 1,2,4,8 --batch 4,8,16,32 --frames 512 --repeats 3 --json
  imgpipe bench raw --streams 1 --pageable --no-cpu
  imgpipe bench raw --frames-file frames.rgb --trace trace.json --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := f.settings(cmd, stderr)
			if err != nil {
				return err
			}
			return runBenchRaw(cmd.Context(), s, &rf, stdout, stderr)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&rf.framesFile, "frames-file", "", "raw RGB frames back to back, as bench/peers/common.py --out writes them")
	fl.IntVar(&rf.pool, "pool", 64, "distinct random frames cycled through (without --frames-file)")
	fl.Uint64Var(&rf.seed, "seed", 1, "seed of the random frames")
	fl.IntVar(&rf.maxPoolMB, "max-pool-mb", 4096, "refuse a frame pool (or --frames-file) larger than this")
	fl.BoolVar(&rf.pageable, "pageable", false, "slots in ordinary (pageable) memory: synchronous copies, no overlap")
	fl.BoolVar(&rf.noCPU, "no-cpu", false, "skip the CPU run that gives the GPU/CPU ratio")
	fl.IntVar(&rf.cpuFrames, "cpu-frames", 0, "frames per CPU run (default 8 per core, at most --frames)")
	fl.IntVar(&rf.workers, "workers", 0, "CPU worker goroutines (default one per core)")
	return cmd
}

// rawPool is the frames a raw run cycles through, each W×H×3 bytes in Go memory.
type rawPool struct {
	w, h   int
	frames [][]byte
}

func (p *rawPool) image(i int) *stages.Image {
	return &stages.Image{W: p.w, H: p.h, C: 3, Stride: p.w * 3, Pix: p.frames[i%len(p.frames)]}
}

// loadFramesFile reads a frames file of whole W×H RGB frames, checking its size against
// the limit before reading anything.
func loadFramesFile(path string, w, h int, maxBytes int64) (*rawPool, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", path)
	}
	frame := int64(w) * int64(h) * 3
	n := fi.Size()
	switch {
	case n == 0:
		return nil, fmt.Errorf("%s is empty", path)
	case n%frame != 0:
		return nil, fmt.Errorf("%s: %d bytes is not a whole number of %dx%d RGB frames (%d bytes each); check --size", path, n, w, h, frame)
	case n > maxBytes:
		return nil, fmt.Errorf("%s: %d MiB, over --max-pool-mb %d", path, n>>20, maxBytes>>20)
	}
	p := &rawPool{w: w, h: h}
	all := make([]byte, n)
	if _, err := io.ReadFull(f, all); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	for off := int64(0); off < n; off += frame {
		p.frames = append(p.frames, all[off:off+frame:off+frame])
	}
	return p, nil
}

// randomPool makes n random frames (never zeros) from seed.
func randomPool(w, h, n int, seed uint64) *rawPool {
	rng := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
	p := &rawPool{w: w, h: h}
	for range n {
		b := make([]byte, w*h*3)
		i := 0
		for ; i+8 <= len(b); i += 8 {
			binary.LittleEndian.PutUint64(b[i:], rng.Uint64())
		}
		for ; i < len(b); i++ {
			b[i] = byte(rng.Uint32())
		}
		p.frames = append(p.frames, b)
	}
	return p
}

// cpuChain runs a benchChain on the CPU with buffers kept between images (one per worker).
type cpuChain struct {
	steps []pipeline.PixelStep
	hasH  bool
	bufs  []*stages.Image
	hist  [256]uint64
}

func (c *benchChain) newCPU() *cpuChain {
	return &cpuChain{steps: c.plan.Pixels, hasH: c.plan.HasHistogram(), bufs: make([]*stages.Image, len(c.plan.Pixels))}
}

// run applies the chain to src (left untouched) and returns the output image and the
// histogram (nil when the chain has none); both are valid until the next run.
func (w *cpuChain) run(src *stages.Image) (*stages.Image, *[256]uint64) {
	var hist *[256]uint64
	if w.hasH {
		clear(w.hist[:])
		hist = &w.hist
	}
	img := src
	for i, ps := range w.steps {
		out, passThrough := ps.Def.Shape(img.Shape(), ps.Params)
		if passThrough {
			ps.Run(nil, img, hist)
			continue
		}
		b := w.bufs[i]
		if b == nil || b.W != out.W || b.H != out.H || b.C != out.C {
			b = stages.NewImage(out.W, out.H, out.C)
			w.bufs[i] = b
		}
		ps.Run(b, img, hist)
		img = b
	}
	return img, hist
}

// sameImage reports whether two images hold the same pixels, describing the first difference.
func sameImage(got, want *stages.Image) error {
	if got.W != want.W || got.H != want.H || got.C != want.C {
		return fmt.Errorf("shape %dx%dx%d, want %dx%dx%d", got.W, got.H, got.C, want.W, want.H, want.C)
	}
	n := want.W * want.C
	for y := range want.H {
		g, w := got.Row(y), want.Row(y)
		if !bytes.Equal(g, w) {
			for x := range n {
				if g[x] != w[x] {
					return fmt.Errorf("pixel (%d, %d) channel %d is %d, want %d", x/want.C, y, x%want.C, g[x], w[x])
				}
			}
		}
	}
	return nil
}

// rawGPUConfig is one configuration of a raw GPU run.
type rawGPUConfig struct {
	Streams, Batch  int
	Pageable        bool
	Frames          int // per timed run
	Warmup, Repeats int // untimed and timed runs of Frames
	Trace           sched.Tracer
	// Check, when set, compares the first and last result of the first batch with the CPU
	// chain on the same frame.
	Check func(frame int, img *stages.Image, hist *[256]uint64) error
}

// rawGPUResult is what a raw GPU run measured.
type rawGPUResult struct {
	Runs     []time.Duration // host wall of each timed run
	Stats    sched.Stats     // device stats of the median run
	Checked  int             // results compared with the CPU chain
	CheckErr error           // the first difference found, nil when every compared result matched
	Alloc    time.Duration   // sched.New: slots and streams
}

// rawTag follows a frame through the executor: which pool frame its slot place holds.
type rawTag struct{ frame int }

// runRawGPU pushes a pool's frames through an executor on dev: first a priming pass that
// writes the pool into every slot place (untimed), cfg.Warmup untimed runs, then
// cfg.Repeats timed runs of cfg.Frames frames. Each run's time is host wall from its first
// Reserve to its last result; the device stats are reset before each run, and those of the
// median run are kept. Tracing covers the last timed run only.
func runRawGPU(ctx context.Context, dev sched.Device, ops []sched.Op, pool *rawPool, cfg rawGPUConfig) (res rawGPUResult, err error) {
	frameBytes := pool.w * pool.h * 3
	step := (frameBytes + sched.Align - 1) &^ (sched.Align - 1)
	if int64(step)*int64(cfg.Batch) > sched.MaxSlotBytes {
		return res, fmt.Errorf("batch %d of %dx%d frames exceeds a slot's %d bytes", cfg.Batch, pool.w, pool.h, int64(sched.MaxSlotBytes))
	}
	var gate *gatedTracer
	scfg := sched.Config{Ops: ops, Streams: cfg.Streams, Slots: cfg.Streams + 2, Batch: cfg.Batch,
		SlotBytes: cfg.Batch * step, Linger: -1, Pageable: cfg.Pageable}
	if cfg.Trace != nil {
		gate = &gatedTracer{t: cfg.Trace}
		scfg.Trace = gate
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	t0 := time.Now()
	e, err := sched.New(ctx, dev, scfg)
	if err != nil {
		return res, err
	}
	res.Alloc = time.Since(t0)

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
	finish := func(err error) (rawGPUResult, error) {
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

// medianIndex is the index of the run whose time is the (lower) median.
func medianIndex(runs []time.Duration) int {
	idx := make([]int, len(runs))
	for i := range idx {
		idx[i] = i
	}
	for i := 1; i < len(idx); i++ { // insertion sort: a handful of runs
		for j := i; j > 0 && runs[idx[j]] < runs[idx[j-1]]; j-- {
			idx[j], idx[j-1] = idx[j-1], idx[j]
		}
	}
	return idx[(len(idx)-1)/2]
}

// gatedTracer passes spans on only while on, so that a trace holds one timed run.
type gatedTracer struct {
	on atomic.Bool
	t  sched.Tracer
}

func (g *gatedTracer) Span(track, name string, start time.Time, d time.Duration, args map[string]any) {
	if g.on.Load() {
		g.t.Span(track, name, start, d, args)
	}
}

// runRawCPU times the chain on the CPU: frames images per run, spread over workers
// goroutines (each with its own buffers), after warmup untimed runs.
func runRawCPU(ctx context.Context, chain *benchChain, pool *rawPool, frames, workers, warmup, repeats int) ([]time.Duration, error) {
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

func runBenchRaw(ctx context.Context, s *benchSettings, rf *rawFlags, stdout, stderr io.Writer) error {
	var errs []error
	if s.frames < 1 {
		errs = append(errs, fmt.Errorf("--frames %d: raw mode times at least 1 frame", s.frames))
	}
	if rf.pool < 1 {
		errs = append(errs, fmt.Errorf("--pool %d: want at least 1", rf.pool))
	}
	if rf.maxPoolMB < 1 || rf.maxPoolMB > benchMaxPoolMB {
		errs = append(errs, fmt.Errorf("--max-pool-mb %d out of range [1, %d]", rf.maxPoolMB, benchMaxPoolMB))
	}
	if rf.cpuFrames < 0 || rf.cpuFrames > benchMaxFrames {
		errs = append(errs, fmt.Errorf("--cpu-frames %d out of range [0, %d]", rf.cpuFrames, benchMaxFrames))
	}
	if rf.workers < 0 || rf.workers > 4096 {
		errs = append(errs, fmt.Errorf("--workers %d out of range [0, 4096]", rf.workers))
	}
	if len(errs) > 0 {
		return &exitError{code: exitUsage, err: pipeline.ErrorList(errs)}
	}
	maxBytes := int64(rf.maxPoolMB) << 20
	frameBytes := int64(s.w) * int64(s.h) * 3
	var pool *rawPool
	source := ""
	if rf.framesFile != "" {
		p, err := loadFramesFile(rf.framesFile, s.w, s.h, maxBytes)
		if err != nil {
			return usageError("--frames-file: %v", err)
		}
		pool, source = p, fmt.Sprintf("%d frames from %s", len(p.frames), rf.framesFile)
	} else {
		n := min(rf.pool, s.frames)
		if int64(n)*frameBytes > maxBytes {
			return usageError("a pool of %d %dx%d frames needs %d MiB, over --max-pool-mb %d", n, s.w, s.h, int64(n)*frameBytes>>20, rf.maxPoolMB)
		}
		pool, source = randomPool(s.w, s.h, n, rf.seed), fmt.Sprintf("%d random frames, seed %d", n, rf.seed)
	}

	tgt, err := openBenchTarget(s.device, s.gpu, stderr)
	if err != nil {
		return err
	}
	defer tgt.Close()
	workers := rf.workers
	if workers == 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	out := newBenchOutput(stdout, stderr, s.json)
	out.textf("imgpipe bench raw: %dx%d RGB (%s), chain %q\n", s.w, s.h, source, s.chain.spec)
	out.textf("%d frames per run, median of %d runs after %d warm-up runs\n", s.frames, s.repeats, s.warmup)

	base := benchRecord{Mode: "raw", Chain: s.chain.label, Width: ptr(s.w), Height: ptr(s.h), Frames: s.frames}
	pixels := float64(s.frames) * float64(s.w) * float64(s.h)

	// CPU: the only run without a GPU, the ratio's denominator with one.
	var cpuRec *benchRecord
	if tgt.dev == nil || !rf.noCPU {
		n := s.frames
		if tgt.dev != nil {
			n = rf.cpuFrames
			if n == 0 {
				n = 8 * workers
			}
			n = min(n, s.frames)
		}
		runs, err := runRawCPU(ctx, s.chain, pool, n, workers, s.warmup, s.repeats)
		if err != nil {
			return benchRunError(ctx, err)
		}
		r := base
		r.System, r.Device, r.Frames, r.Threads = "imgpipe-cpu", cpuName(), n, workers
		r.Exact = true
		r.Note = "the CPU reference implementation (package stages)"
		if tgt.dev == nil {
			r.Note += "; no GPU"
			if tgt.why != "" {
				r.Note += ": " + tgt.why
			}
		}
		r.setTimes(runs, n, float64(n)*float64(s.w)*float64(s.h))
		cpuRec = &r
		out.textf("CPU, %d workers, %d frames per run: %s img/s, %s MP/s\n", workers, n, fmtRate(r.ImgPerS), fmtRate(r.MpixPerS))
		if err := out.record(&r); err != nil {
			return err
		}
	}
	if tgt.dev == nil {
		if s.device == "auto" {
			out.textf("no GPU: only the CPU was measured\n")
		}
		if s.trace != "" {
			fmt.Fprintf(stderr, "imgpipe: --trace: the trace shows a GPU's streams; without a GPU none was written\n")
		}
		return nil
	}

	bw, err := sched.MeasureCopy(tgt.dev, benchCopyLimitBytes, benchCopyReps)
	if err != nil {
		return benchRunError(ctx, fmt.Errorf("measuring copy bandwidth: %w", err))
	}
	out.textf("%s: page-locked H2D %.1f GB/s, D2H %.1f GB/s; copy limit %s MP/s (H2D ÷ 3 bytes per input pixel)\n",
		tgt.dev.Name(), bw.H2D/1e9, bw.D2H/1e9, fmtRate(copyLimitMPix(bw)))

	var tr *sched.Trace
	if s.trace != "" {
		tr = sched.NewTrace("imgpipe bench raw", 0)
	}
	cpuCheck := s.chain.newCPU()
	check := func(frame int, img *stages.Image, hist *[256]uint64) error {
		want, wantH := cpuCheck.run(pool.image(frame))
		if err := sameImage(img, want); err != nil {
			return err
		}
		if (hist == nil) != (wantH == nil) || (hist != nil && *hist != *wantH) {
			return errors.New("histogram differs from the CPU chain's")
		}
		return nil
	}
	out.header()
	for _, streams := range s.streams {
		for _, batch := range s.batch {
			cfg := rawGPUConfig{Streams: streams, Batch: batch, Pageable: rf.pageable, Frames: s.frames,
				Warmup: s.warmup, Repeats: s.repeats, Check: check}
			if tr != nil {
				cfg.Trace = tr
			}
			res, err := runRawGPU(ctx, tgt.dev, s.chain.ops, pool, cfg)
			if err != nil {
				return benchRunError(ctx, fmt.Errorf("streams %d, batch %d: %w", streams, batch, err))
			}
			r := base
			r.System, r.Device, r.Streams, r.Batch = "imgpipe", tgt.dev.Name(), streams, batch
			r.Pinned = ptr(!rf.pageable)
			if rf.pageable {
				r.System = "imgpipe-pageable"
			}
			r.Exact = res.Checked > 0 && res.CheckErr == nil
			r.Note = fmt.Sprintf("exact: %d results compared with the CPU chain", res.Checked)
			if res.CheckErr != nil {
				r.Note = "NOT exact: " + res.CheckErr.Error()
				fmt.Fprintf(stderr, "imgpipe: bench raw: streams %d, batch %d: output differs from the CPU chain: %v\n", streams, batch, res.CheckErr)
			}
			r.setTimes(res.Runs, s.frames, pixels)
			r.setDevice(res.Stats)
			r.setLimit(&bw)
			if cpuRec != nil && cpuRec.MpixPerS > 0 {
				r.CPUMpixPerS = ptr(cpuRec.MpixPerS)
				r.GPUCPURatio = ptr(r.MpixPerS / cpuRec.MpixPerS)
			}
			out.row(&r, res.Stats)
			if err := out.record(&r); err != nil {
				return err
			}
		}
	}
	return out.writeTrace(tr, s.trace, "; open in ui.perfetto.dev")
}

// benchRunError maps a failed measurement to its exit code: 130 when interrupted, 3
// otherwise (a device fault, say).
func benchRunError(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return &exitError{code: exitInterrupted, err: fmt.Errorf("interrupted: %w", err)}
	}
	return fatalError("%v", err)
}

// benchOutput writes the human table on stderr when --json puts records on stdout, and on
// stdout otherwise.
type benchOutput struct {
	text, records io.Writer
}

func newBenchOutput(stdout, stderr io.Writer, asJSON bool) *benchOutput {
	if asJSON {
		return &benchOutput{text: stderr, records: stdout}
	}
	return &benchOutput{text: stdout}
}

func (o *benchOutput) textf(format string, args ...any) { fmt.Fprintf(o.text, format, args...) }

// writeTrace writes the timeline of the last timed run to path (--trace) and
// says so, with hint after the span count; a nil tr (no --trace) does nothing.
func (o *benchOutput) writeTrace(tr *sched.Trace, path, hint string) error {
	if tr == nil {
		return nil
	}
	if err := tr.WriteFile(path); err != nil {
		return fatalError("--trace: %v", err)
	}
	o.textf("trace of the last timed run: %s (%d spans%s)\n", path, tr.Len(), hint)
	return nil
}

func (o *benchOutput) record(r *benchRecord) error {
	if o.records == nil {
		return nil
	}
	if err := emitRecord(o.records, r); err != nil {
		return fatalError("writing the record: %v", err)
	}
	return nil
}

func (o *benchOutput) header() {
	o.textf("%-7s %5s %9s %8s %6s %7s %8s %8s %8s %8s %7s %s\n",
		"streams", "batch", "img/s", "MP/s", "limit", "overlap", "ΣH2D ms", "Σkern ms", "ΣD2H ms", "wall ms", "GPU/CPU", "bound by")
}

func (o *benchOutput) row(r *benchRecord, st sched.Stats) {
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
