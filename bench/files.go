package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"github.com/imgpipe/imgpipe/cudastage/sched"
	"github.com/imgpipe/imgpipe/pipeline"
	"github.com/imgpipe/imgpipe/pipeline/folderrun"
	"github.com/imgpipe/imgpipe/pipeline/gpu"
	"github.com/imgpipe/imgpipe/stages"
)

// FilesConfig are the files mode's own settings.
type FilesConfig struct {
	Dir      string // the input folder, walked recursively
	Out      string // the output folder; "" makes a temporary one, removed by Close
	Workers  int    // CPU workers; on a GPU, decode workers and as many save workers (0: one per core)
	PinnedMB int    // GPU: page-locked memory the slots share (0: batch 1080p frames per slot)
}

// Files is a folder benchmark ready to run: its settings checked, its chain compiled with
// a PNG save, its output folder made.
type Files struct {
	c    FilesConfig
	plan *pipeline.Plan
	out  string
	temp bool // out is a temporary folder
}

// NewFiles checks c, compiles "decode | chain | save format=png" and makes the output
// folder. Bad settings are *OptionErrors. Close removes a temporary output folder.
func NewFiles(c FilesConfig, chain *Chain) (*Files, error) {
	if err := pipeline.CheckSetting("workers", c.Workers); err != nil {
		return nil, optionErrorf("--workers: %v", err)
	}
	if err := pipeline.CheckSetting("pinned_mb", c.PinnedMB); err != nil {
		return nil, optionErrorf("--pinned-mb: %v", err)
	}
	fi, err := os.Stat(c.Dir)
	if err != nil {
		return nil, optionErrorf("input folder: %v", err)
	}
	if !fi.IsDir() {
		return nil, optionErrorf("input folder %s is not a folder", c.Dir)
	}
	steps := append([]pipeline.Step(nil), chain.plan.Steps...)
	save, err := pipeline.ParseSpec("save format=png")
	if err != nil {
		return nil, err
	}
	plan, err := pipeline.Compile(append(steps, save...))
	if err != nil {
		return nil, &OptionError{Err: err}
	}
	f := &Files{c: c, plan: plan, out: c.Out}
	if f.out == "" {
		if f.out, err = os.MkdirTemp("", "imgpipe-bench-files-"); err != nil {
			return nil, fmt.Errorf("temporary output folder: %w", err)
		}
		f.temp = true
		return f, nil
	}
	if err := os.MkdirAll(f.out, 0o755); err != nil {
		return nil, fmt.Errorf("--out: %w", err)
	}
	if fo, err := os.Stat(f.out); err == nil && os.SameFile(fi, fo) {
		return nil, optionErrorf("--out is the input folder; choose another")
	}
	return f, nil
}

// Close removes the output folder when it is a temporary one.
func (f *Files) Close() error {
	if !f.temp {
		return nil
	}
	return os.RemoveAll(f.out)
}

// Run times the folder with o: on the CPU (o.Device nil), or on o.Device for every
// combination of o.Streams and o.Batch. Each run is timed from start to the report's last
// line; the first and last ok inputs of the report are then checked against the CPU chain.
// Each result goes to o.Record, and a line to o.Text.
func (f *Files) Run(ctx context.Context, o Options) error {
	workers := f.c.Workers
	if workers == 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	o.textf("imgpipe bench files %s: %q, median of %d runs after %d warm-up runs\n", f.c.Dir, f.plan.String(), o.Repeats, o.Warmup)

	var tr *sched.Trace
	if o.Trace != "" {
		tr = sched.NewTrace("imgpipe bench files", 0)
	}
	configs := [][2]int{{0, 0}} // the CPU
	if o.Device != nil {
		configs = configs[:0]
		for _, st := range o.Streams {
			for _, b := range o.Batch {
				configs = append(configs, [2]int{st, b})
			}
		}
	}
	noticed := map[string]bool{}
	for _, c := range configs {
		run := &folderRun{plan: f.plan, in: f.c.Dir, out: f.out, report: filepath.Join(f.out, folderrun.ReportName),
			limit: o.Frames, workers: workers, streams: c[0], batch: c[1],
			notice: func(msg string) {
				if !noticed[msg] { // once per bench, not once per repeat
					noticed[msg] = true
					o.notice("%s", msg)
				}
			}}
		if c[0] > 0 {
			run.pinnedMB = f.c.PinnedMB
			// The runs of a configuration share their slots' memory: each run then
			// measures the folder's processing, not page-locking GiBs again.
			var err error
			if run.set, err = gpu.NewSet(o.Device); err != nil {
				return err
			}
			defer run.closePools() // on an early return; closed below otherwise
		}
		for range o.Warmup {
			if _, _, err := run.once(ctx); err != nil {
				return err
			}
		}
		var runs []time.Duration
		var sum pipeline.Summary
		for i := range o.Repeats {
			if tr != nil && i == o.Repeats-1 {
				run.trace = tr
			}
			got, d, err := run.once(ctx)
			if err != nil {
				return err
			}
			sum = got
			runs = append(runs, d)
		}
		if err := run.closePools(); err != nil {
			return err
		}
		if sum.OK == 0 {
			return fmt.Errorf("no image under %s went through the chain (%d failed)", f.c.Dir, sum.Failed)
		}
		r := Record{Mode: "files", Chain: o.Chain.Label, Frames: sum.OK, Failed: sum.Failed,
			Megapixels: ptr(sum.Megapixels)}
		r.System, r.Device, r.Threads = "imgpipe-cpu", cpuName(), workers
		if sum.Streams > 0 { // it ran on the GPU (a chain the GPU cannot run goes to the CPU)
			r.System, r.Device, r.Streams, r.Batch = "imgpipe", sum.Device, sum.Streams, sum.Batch
			r.Overlap = ptr(sum.Overlap)
			r.H2DS, r.KernelsS, r.D2HS = ptr(sum.H2DSeconds), ptr(sum.KernelSeconds), ptr(sum.D2HSeconds)
			r.DevWallS = ptr(sum.DeviceWallSeconds)
		}
		r.setTimes(runs, sum.OK, sum.Megapixels*1e6)
		r.PerImageMS = perImageMS(sum)
		n, cerr := checkFolderOutputs(f.plan, o.Chain, f.c.Dir, f.out, run.report)
		r.Exact = cerr == nil
		r.Note = fmt.Sprintf("exact: %d outputs and histograms compared with the CPU chain", n)
		switch {
		case errors.Is(cerr, errDeviceDecoded):
			r.Note = "exact: not checked here: " + cerr.Error()
		case cerr != nil:
			r.Note = "NOT exact: " + cerr.Error()
			o.notice("bench files: %v", cerr)
		}
		if sum.Failed > 0 {
			r.Note += fmt.Sprintf("; %d inputs failed", sum.Failed)
			if !f.temp {
				r.Note += " (see " + run.report + ")"
			}
		}
		if sum.CPUFallback > 0 {
			r.Note += fmt.Sprintf("; %d images too large for a slot ran on the CPU path", sum.CPUFallback)
		}
		exact := fmt.Sprint(r.Exact)
		if errors.Is(cerr, errDeviceDecoded) {
			exact = "not checked (every input decoded on the device)"
		}
		o.textf("%s on %s: %d images (%.1f MP), %s img/s, %s MP/s, %d failed, exact %s\n",
			r.System, r.Device, sum.OK, sum.Megapixels, fmtRate(r.ImgPerS), fmtRate(r.MpixPerS), sum.Failed, exact)
		p := r.PerImageMS
		o.textf("  per image (worker time, %d workers): read %.2f ms, decode %.2f ms, chain %.2f ms, encode %.2f ms, write %.2f ms\n",
			sum.Workers, p.Read, p.Decode, p.Chain, p.Encode, p.Write)
		if err := o.emit(&r); err != nil {
			return err
		}
	}
	return o.writeTrace(tr, "")
}

// perImageMS turns a run's phase totals into milliseconds per image of the ones done.
func perImageMS(sum pipeline.Summary) *pipeline.PhaseSeconds {
	n := float64(sum.OK + sum.Failed)
	if n == 0 {
		return &pipeline.PhaseSeconds{}
	}
	ms := func(s float64) float64 { return math.Round(s/n*1e6) / 1e3 }
	p := sum.Phases
	return &pipeline.PhaseSeconds{Read: ms(p.Read), Decode: ms(p.Decode), Chain: ms(p.Chain), Encode: ms(p.Encode), Write: ms(p.Write)}
}

// limitSource yields the first n inputs of src (all of them when n is 0).
type limitSource struct {
	src  pipeline.Source
	n, i int
}

// Next is src's next input, or io.EOF after n of them.
func (l *limitSource) Next(ctx context.Context) (pipeline.Input, error) {
	if l.n > 0 && l.i >= l.n {
		return pipeline.Input{}, io.EOF
	}
	l.i++
	return l.src.Next(ctx)
}

// folderRun is the runner over the folder, on the CPU or, with a set, on a GPU, as `imgpipe
// run` runs it (folderrun).
type folderRun struct {
	plan            *pipeline.Plan
	in, out, report string
	limit, workers  int
	set             *gpu.Set // the device and the memory its runs share (GPU)
	streams, batch  int
	pinnedMB        int
	trace           sched.Tracer
	notice          func(string)
}

// closePools frees the shared pools' memory (GPU); later calls do nothing.
func (r *folderRun) closePools() error {
	if r.set == nil {
		return nil
	}
	return r.set.Close()
}

// once runs the chain over the folder and writes the report; it returns the summary and
// the wall time, from the first input taken to the report's rename.
func (r *folderRun) once(ctx context.Context) (pipeline.Summary, time.Duration, error) {
	exec := pipeline.DefaultExecution()
	exec.Workers, exec.Device = r.workers, "cpu"
	req := folderrun.Request{Plan: r.plan, Input: r.in, Output: r.out, Report: r.report, Notice: r.notice}
	if r.set != nil {
		exec.Device, exec.Streams, exec.Batch, exec.PinnedMB = "cuda", r.streams, r.batch, r.pinnedMB
		req.Devices = r.set.Devices()
	}
	req.Exec = exec
	var start time.Time
	req.Starting = func(src pipeline.Source) pipeline.Source {
		start = time.Now()
		return &limitSource{src: src, n: r.limit}
	}
	req.Options = func(o *pipeline.Options) {
		if g, ok := o.Backend.(*gpu.Options); ok {
			o.Backend = r.set.Backend(*g) // the set's shared memory
		}
		if r.trace != nil {
			o.Trace = r.trace
		}
	}
	sum, err := folderrun.Run(ctx, req)
	var bad *folderrun.RequestError
	if errors.As(err, &bad) {
		err = &OptionError{Err: bad.Err}
	}
	return sum, time.Since(start), err
}

// errDeviceDecoded says that every input was decoded on the device, whose pixels the CPU
// decoders do not reproduce: the CPU chain cannot recompute its outputs from the files
// (TestGPUDecodeThenExact checks that path from the device's decoded pixels instead).
var errDeviceDecoded = errors.New("every input was decoded on the device (nvJPEG), whose pixels the CPU does not reproduce")

// checkFolderOutputs recomputes the first and last ok inputs of the report that were
// decoded on the CPU and compares them with the saved PNGs and the report's histograms. It
// returns how many were compared.
func checkFolderOutputs(plan *pipeline.Plan, chain *Chain, in, out, report string) (int, error) {
	f, err := os.Open(report)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	var first, last *pipeline.ReportLine
	deviceDecoded := 0
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		var l pipeline.ReportLine
		if json.Unmarshal(sc.Bytes(), &l) != nil || l.Status != pipeline.StatusOK || l.Output == "" {
			continue
		}
		if l.Decoder == sched.RouteHW || l.Decoder == sched.RouteCUDA {
			deviceDecoded++
			continue
		}
		if first == nil {
			first = &l
		} else {
			last = &l
		}
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("report: %w", err)
	}
	cpu := chain.newCPU()
	n := 0
	for _, l := range []*pipeline.ReportLine{first, last} {
		if l == nil {
			continue
		}
		if err := checkOneOutput(plan, cpu, filepath.Join(in, filepath.FromSlash(l.Input)), filepath.Join(out, filepath.FromSlash(l.Output)), l); err != nil {
			return n, fmt.Errorf("%s: %w", l.Input, err)
		}
		n++
	}
	if n == 0 && deviceDecoded > 0 {
		return 0, errDeviceDecoded
	}
	if n == 0 {
		return 0, errors.New("no input went through the chain")
	}
	return n, nil
}

func checkOneOutput(plan *pipeline.Plan, cpu *cpuChain, inPath, outPath string, l *pipeline.ReportLine) error {
	alloc := func(w, h, c int) (*stages.Image, error) { return stages.NewImage(w, h, c), nil }
	data, err := os.ReadFile(inPath)
	if err != nil {
		return err
	}
	src, _, err := plan.Decode.Decode(data, alloc)
	if err != nil {
		return fmt.Errorf("decoding the input again: %w", err)
	}
	want, hist := cpu.run(src)
	if hist != nil && (len(l.Histogram) != 256 || [256]uint64(l.Histogram) != *hist) {
		return errors.New("the report's histogram differs from the CPU chain's")
	}
	data, err = os.ReadFile(outPath)
	if err != nil {
		return err
	}
	got, err := stages.Decode(data, stages.DecodeOptions{}, alloc)
	if err != nil {
		return fmt.Errorf("decoding the output: %w", err)
	}
	if want.C == 1 && got.C == 3 { // decode expands gray PNGs to R = G = B
		g := stages.NewImage(got.W, got.H, 1)
		for i := range g.Pix {
			g.Pix[i] = got.Pix[3*i]
		}
		got = g
	}
	if err := sameImage(got, want); err != nil {
		return fmt.Errorf("the saved output differs from the CPU chain's: %w", err)
	}
	return nil
}
