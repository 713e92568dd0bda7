package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"github.com/spf13/cobra"

	"github.com/imgpipe/imgpipe/cudastage/sched"
	"github.com/imgpipe/imgpipe/pipeline"
	"github.com/imgpipe/imgpipe/stages"
)

// filesFlags are `bench files`'s own options.
type filesFlags struct {
	out      string
	workers  int
	pinnedMB int
}

func newBenchFilesCmd(f *benchFlags, stdout, stderr io.Writer) *cobra.Command {
	var ff filesFlags
	cmd := &cobra.Command{
		Use:   "files DIR [flags]",
		Short: "End to end over a folder: decode, the chain, save as PNG",
		Long: `Time 'imgpipe run' over a folder: every image under DIR (recursively) is decoded, run
through the chain and saved as PNG, with the JSON Lines report, by the same runner as

  imgpipe run -i DIR -o OUT -p 'decode | CHAIN | save format=png' --device D --streams S --batch B

On a GPU, decode workers decode straight into the executor's page-locked slots, the chain
runs as one device segment, and save workers encode from page-locked memory; every
--streams × --batch combination is one result. On the CPU, --workers goroutines run the
whole chain, one image each.

Outputs go to a temporary folder, removed at the end, or to --out (each run rewrites
the same files). Each run is timed from start to the report's last line; throughput is
images (and decoded megapixels) per second. Every image file is taken, unless --frames N
limits the run to the first N.

After timing, the first and last image of the report are checked: the CPU chain is run
on the decoded input and compared with the saved PNG and the report's histogram
("exact" in the output). Inputs that fail (unreadable files) are counted and named.`,
		Example: `  imgpipe bench files photos --device cuda --repeats 3
  imgpipe bench files photos --device cpu --workers 16 --json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := f.settings(cmd, stderr)
			if err != nil {
				return err
			}
			if !cmd.Flags().Changed("frames") {
				s.frames = 0 // every file, unless --frames says otherwise
			}
			return runBenchFiles(cmd.Context(), s, &ff, args[0], stdout, stderr)
		},
	}
	cmd.Flags().StringVar(&ff.out, "out", "", "output folder (default: a temporary folder, removed at the end)")
	cmd.Flags().IntVar(&ff.workers, "workers", 0, "CPU workers; on a GPU, decode workers and as many save workers (default one per core)")
	cmd.Flags().IntVar(&ff.pinnedMB, "pinned-mb", 0, "GPU: page-locked memory the slots share, which sets the largest image per batch (default: batch 1080p frames per slot)")
	return cmd
}

// limitSource yields the first n inputs of src (all of them when n is 0).
type limitSource struct {
	src  pipeline.Source
	n, i int
}

func (l *limitSource) Next(ctx context.Context) (pipeline.Input, error) {
	if l.n > 0 && l.i >= l.n {
		return pipeline.Input{}, io.EOF
	}
	l.i++
	return l.src.Next(ctx)
}

// folderRun is the runner over the folder, on the CPU or (dev set) on a GPU.
type folderRun struct {
	plan            *pipeline.Plan
	in, out, report string
	limit, workers  int
	dev             sched.Device
	streams, batch  int
	pinnedBytes     int64
	trace           sched.Tracer
	notice          func(string)
}

// once runs the chain over the folder and writes the report; it returns the summary and
// the wall time.
func (r *folderRun) once(ctx context.Context) (pipeline.Summary, time.Duration, error) {
	var sum pipeline.Summary
	var runErr error
	src := &limitSource{src: pipeline.Folder(r.in, r.out), n: r.limit}
	opt := pipeline.Options{Workers: r.workers, Notice: r.notice}
	if r.dev != nil {
		opt.GPU = &pipeline.GPUOptions{Device: r.dev, Streams: r.streams, Batch: r.batch, PinnedBytes: r.pinnedBytes}
	}
	if r.trace != nil {
		opt.Trace = r.trace
	}
	start := time.Now()
	werr := stages.WriteFileAtomic(r.report, func(w io.Writer) error {
		opt.Report = w
		sum, runErr = pipeline.Run(ctx, r.plan, src, pipeline.ToFolder(r.out), opt)
		return nil
	})
	d := time.Since(start)
	if runErr == nil {
		runErr = werr
	}
	return sum, d, runErr
}

// checkFolderOutputs recomputes the first and last ok inputs of the report on the CPU and
// compares them with the saved PNGs and the report's histograms. It returns how many were
// compared.
func checkFolderOutputs(plan *pipeline.Plan, chain *benchChain, in, out, report string) (int, error) {
	f, err := os.Open(report)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	var first, last *pipeline.ReportLine
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		var l pipeline.ReportLine
		if json.Unmarshal(sc.Bytes(), &l) != nil || l.Status != pipeline.StatusOK || l.Output == "" {
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
	src, err := plan.Decode.Decode(data, alloc)
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

func runBenchFiles(ctx context.Context, s *benchSettings, ff *filesFlags, dir string, stdout, stderr io.Writer) error {
	if ff.workers < 0 || ff.workers > 4096 {
		return usageError("--workers %d out of range [0, 4096]", ff.workers)
	}
	if ff.pinnedMB < 0 || ff.pinnedMB > benchMaxPoolMB {
		return usageError("--pinned-mb %d out of range [0, %d]", ff.pinnedMB, benchMaxPoolMB)
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return usageError("input folder: %v", err)
	}
	if !fi.IsDir() {
		return usageError("input folder %s is not a folder", dir)
	}
	steps := append([]pipeline.Step(nil), s.chain.plan.Steps...)
	save, err := pipeline.ParseSpec("save format=png")
	if err != nil {
		return err
	}
	plan, err := pipeline.Compile(append(steps, save...))
	if err != nil {
		return usageError("%v", err)
	}
	out := ff.out
	if out == "" {
		if out, err = os.MkdirTemp("", "imgpipe-bench-files-"); err != nil {
			return fatalError("temporary output folder: %v", err)
		}
		defer os.RemoveAll(out)
	} else {
		if err := os.MkdirAll(out, 0o755); err != nil {
			return fatalError("--out: %v", err)
		}
		if fo, err := os.Stat(out); err == nil && os.SameFile(fi, fo) {
			return usageError("--out is the input folder; choose another")
		}
	}
	tgt, err := openBenchTarget(s.device, s.gpu, stderr)
	if err != nil {
		return err
	}
	defer tgt.Close()
	workers := ff.workers
	if workers == 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	o := newBenchOutput(stdout, stderr, s.json)
	o.textf("imgpipe bench files %s: %q, median of %d runs after %d warm-up runs\n", dir, plan.String(), s.repeats, s.warmup)

	var tr *sched.Trace
	if s.trace != "" {
		tr = sched.NewTrace("imgpipe bench files", 0)
	}
	configs := [][2]int{{0, 0}} // the CPU
	if tgt.dev != nil {
		configs = configs[:0]
		for _, st := range s.streams {
			for _, b := range s.batch {
				configs = append(configs, [2]int{st, b})
			}
		}
	}
	noticed := map[string]bool{}
	for _, c := range configs {
		run := &folderRun{plan: plan, in: dir, out: out, report: filepath.Join(out, defaultReportName),
			limit: s.frames, workers: workers, streams: c[0], batch: c[1],
			notice: func(msg string) {
				if !noticed[msg] { // once per bench, not once per repeat
					noticed[msg] = true
					fmt.Fprintf(stderr, "imgpipe: %s\n", msg)
				}
			}}
		if c[0] > 0 {
			run.dev, run.pinnedBytes = tgt.dev, int64(ff.pinnedMB)<<20
		}
		for range s.warmup {
			if _, _, err := run.once(ctx); err != nil {
				return benchRunError(ctx, err)
			}
		}
		var runs []time.Duration
		var sum pipeline.Summary
		for i := range s.repeats {
			if tr != nil && i == s.repeats-1 {
				run.trace = tr
			}
			got, d, err := run.once(ctx)
			if err != nil {
				return benchRunError(ctx, err)
			}
			sum = got
			runs = append(runs, d)
		}
		if sum.OK == 0 {
			return fatalError("no image under %s went through the chain (%d failed)", dir, sum.Failed)
		}
		r := benchRecord{Mode: "files", Chain: s.chain.label, Frames: sum.OK, Failed: sum.Failed,
			Megapixels: ptr(sum.Megapixels)}
		r.System, r.Device, r.Threads = "imgpipe-cpu", cpuName(), workers
		if sum.Streams > 0 { // it ran on the GPU (a chain the GPU cannot run goes to the CPU)
			r.System, r.Device, r.Streams, r.Batch = "imgpipe", sum.Device, sum.Streams, sum.Batch
			r.Overlap = ptr(sum.Overlap)
			r.H2DS, r.KernelsS, r.D2HS = ptr(sum.H2DSeconds), ptr(sum.KernelSeconds), ptr(sum.D2HSeconds)
			r.DevWallS = ptr(sum.DeviceWallSeconds)
		}
		r.setTimes(runs, sum.OK, sum.Megapixels*1e6)
		n, cerr := checkFolderOutputs(plan, s.chain, dir, out, run.report)
		r.Exact = cerr == nil
		r.Note = fmt.Sprintf("exact: %d outputs and histograms compared with the CPU chain", n)
		if cerr != nil {
			r.Note = "NOT exact: " + cerr.Error()
			fmt.Fprintf(stderr, "imgpipe: bench files: %v\n", cerr)
		}
		if sum.Failed > 0 {
			r.Note += fmt.Sprintf("; %d inputs failed", sum.Failed)
			if ff.out != "" {
				r.Note += " (see " + run.report + ")"
			}
		}
		if sum.CPUFallback > 0 {
			r.Note += fmt.Sprintf("; %d images too large for a slot ran on the CPU path", sum.CPUFallback)
		}
		o.textf("%s on %s: %d images (%.1f MP), %s img/s, %s MP/s, %d failed, exact %v\n",
			r.System, r.Device, sum.OK, sum.Megapixels, fmtRate(r.ImgPerS), fmtRate(r.MpixPerS), sum.Failed, r.Exact)
		if err := o.record(&r); err != nil {
			return err
		}
	}
	return o.writeTrace(tr, s.trace, "")
}
