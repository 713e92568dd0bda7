package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/spf13/cobra"

	"github.com/imgpipe/imgpipe/bench"
	"github.com/imgpipe/imgpipe/cudastage/sched"
	"github.com/imgpipe/imgpipe/pipeline"
)

// benchCopyBytes is the buffer the copy limit is measured with; 0 is bench.DefaultCopyBytes
// (tests on a fake device make it small, to stay fast).
var benchCopyBytes = 0

// benchFlags are the options every bench mode shares (persistent flags of `imgpipe bench`);
// those bench.Options takes as they are go straight into o.
type benchFlags struct {
	device                      string
	gpu                         int
	streams, batch, chain, size string // streams and batch: "2" or a list, "1,2,4,8"
	sigma                       float64
	json                        bool
	o                           bench.Options
}

func newBenchCmd(stdout, stderr io.Writer) *cobra.Command {
	var f benchFlags
	cmd := &cobra.Command{
		Use:   "bench raw|files DIR|copy [flags]",
		Short: "Measure throughput: the engine on raw frames, a folder end to end, copy bandwidth",
		Long: `Measure how fast imgpipe runs a chain of pixel stages, and how close it comes to the
machine's limit. Three modes:

  raw        the engine alone: random RGB frames (or --frames-file) already in page-locked
             memory go through the same multi-stream executor as 'imgpipe run --device cuda',
             with no decode or save. It first measures the GPU's own page-locked H2D and D2H
             bandwidth; each input pixel costs 3 bytes of H2D, so the copy limit in MP/s is
             H2D bytes/s ÷ 3, and each result says which fraction of it was reached.
  files DIR  end to end over a folder: decode, the chain, and save as PNG (into a temporary
             folder, or --out), through the same runner as 'imgpipe run'.
  copy       page-locked and pageable H2D/D2H bandwidth at a few sizes, and a profile of one
             batch of the chain: allocation, H2D, each kernel and D2H.

Every timing is the median of --repeats timed runs after --warmup untimed ones. GPU phases
are timed with CUDA events; throughput is input frames (and megapixels) per second of host
wall time, from the first frame handed to the executor to the last result back.

--streams and --batch take a list ("1,2,4,8"): every combination is measured, one result
per configuration. With --json each result is one JSON line in the schema of
bench/peers/common.py (system "imgpipe"; "imgpipe-pageable" for --pageable runs and
"imgpipe-cpu" for CPU runs), which bench/plot/plot.py reads.

--device auto uses the GPU when one works and otherwise says so and runs on the CPU (all
cores); --device cuda fails when no GPU works; 'copy' needs a GPU. --gpu N picks the GPU
(default 0, numbered as 'imgpipe devices' lists them); one the driver does not see is an
error in every mode.`,
		Example: `  # The headline: 1080p frames, 2 streams, batch 16, with a timeline:
  imgpipe bench raw --device cuda --streams 2 --batch 16 --trace trace.json

  # Sweep streams and batch sizes, one JSON line per configuration:
  imgpipe bench raw --streams 1,2,4,8 --batch 4,8,16,32 --json > imgpipe.jsonl

  # The very frames the peers time (python3 bench/peers/common.py --out frames.rgb):
  imgpipe bench raw --frames-file frames.rgb --size 1920x1080

  # A folder end to end, on the GPU and on the CPU:
  imgpipe bench files photos --device cuda
  imgpipe bench files photos --device cpu

  # Copy bandwidth and a one-batch profile:
  imgpipe bench copy --batch 16`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return usageError("bench needs a mode: raw, files DIR or copy (see 'imgpipe bench --help')")
		},
	}
	pf := cmd.PersistentFlags()
	pf.StringVar(&f.device, "device", "auto", "auto, cpu or cuda")
	pf.IntVar(&f.gpu, "gpu", 0, "which GPU to use, counting from 0 (see 'imgpipe devices')")
	pf.StringVar(&f.streams, "streams", "2", "CUDA streams, or a list to sweep: 1,2,4,8")
	pf.StringVar(&f.batch, "batch", "16", "images per GPU batch, or a list to sweep: 4,8,16,32")
	pf.StringVar(&f.chain, "chain", "", "pixel stages to run (default \""+bench.DefaultChain(bench.DefaultSigma)+"\")")
	pf.Float64Var(&f.sigma, "sigma", bench.DefaultSigma, "blur sigma of the default chain")
	pf.StringVar(&f.size, "size", "1920x1080", "raw frame size WxH")
	pf.IntVar(&f.o.Frames, "frames", 1024, "frames per timed run (raw); files: only the first N files when given (0: all)")
	pf.IntVar(&f.o.Warmup, "warmup", 1, "untimed runs before timing")
	pf.IntVar(&f.o.Repeats, "repeats", 5, "timed runs; the median is reported")
	pf.StringVar(&f.o.Trace, "trace", "", "write a Chrome trace-event timeline of the last timed run (one configuration only)")
	pf.BoolVar(&f.json, "json", false, "one JSON line per configuration on stdout (peers' schema)")

	var rc bench.RawConfig
	raw := &cobra.Command{
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
			o, err := f.options(cmd, stdout, stderr)
			if err != nil {
				return err
			}
			pool, err := rc.Pool(o)
			if err != nil {
				return benchError(cmd.Context(), err)
			}
			return f.withDevice(cmd.Context(), o, "", stderr, func() error { return bench.Raw(cmd.Context(), *o, rc, pool) })
		},
	}
	fl := raw.Flags()
	fl.StringVar(&rc.FramesFile, "frames-file", "", "raw RGB frames back to back, as bench/peers/common.py --out writes them")
	fl.IntVar(&rc.PoolSize, "pool", 64, "distinct random frames cycled through (without --frames-file)")
	fl.Uint64Var(&rc.Seed, "seed", 1, "seed of the random frames")
	fl.IntVar(&rc.MaxPoolMB, "max-pool-mb", 4096, "refuse a frame pool (or --frames-file) larger than this")
	fl.BoolVar(&rc.Pageable, "pageable", false, "slots in ordinary (pageable) memory: synchronous copies, no overlap")
	fl.BoolVar(&rc.NoCPU, "no-cpu", false, "skip the CPU run that gives the GPU/CPU ratio")
	fl.IntVar(&rc.CPUFrames, "cpu-frames", 0, "frames per CPU run (default 8 per core, at most --frames)")
	fl.IntVar(&rc.Workers, "workers", 0, "CPU worker goroutines (default one per core)")

	var fc bench.FilesConfig
	files := &cobra.Command{
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
			o, err := f.options(cmd, stdout, stderr)
			if err != nil {
				return err
			}
			if !cmd.Flags().Changed("frames") {
				o.Frames = 0 // every file, unless --frames says otherwise
			}
			fc.Dir = args[0]
			fb, err := bench.NewFiles(fc, o.Chain)
			if err != nil {
				return benchError(cmd.Context(), err)
			}
			defer fb.Close()
			return f.withDevice(cmd.Context(), o, "", stderr, func() error { return fb.Run(cmd.Context(), *o) })
		},
	}
	files.Flags().StringVar(&fc.Out, "out", "", "output folder (default: a temporary folder, removed at the end)")
	files.Flags().IntVar(&fc.Workers, "workers", 0, "CPU workers; on a GPU, decode workers and as many save workers (default one per core)")
	files.Flags().IntVar(&fc.PinnedMB, "pinned-mb", 0, "GPU: page-locked memory the slots share, which sets the largest image per batch (default: batch 1080p frames per slot)")

	cp := &cobra.Command{
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
			o, err := f.options(cmd, stdout, stderr)
			switch {
			case err != nil:
				return err
			case f.device == "cpu":
				return usageError("bench copy measures a GPU's copies; --device cpu leaves nothing to measure")
			case o.Trace != "":
				return usageError("--trace: bench copy records no timeline; use bench raw --trace")
			}
			return f.withDevice(cmd.Context(), o, "bench copy needs a GPU", stderr, func() error {
				rec, err := bench.Copy(cmd.Context(), *o)
				if err == nil && f.json {
					if err = json.NewEncoder(stdout).Encode(rec); err != nil {
						err = fmt.Errorf("writing the record: %w", err)
					}
				}
				return err
			})
		},
	}
	cmd.AddCommand(raw, files, cp)
	return cmd
}

// options checks the shared flags into bench.Options. Every error is a usage error naming
// the flag. With --json, records go to stdout as JSON lines and the table to stderr;
// otherwise the table goes to stdout.
func (f *benchFlags) options(cmd *cobra.Command, stdout, stderr io.Writer) (*bench.Options, error) {
	o := f.o
	o.CopyBytes, o.Text, o.Version = benchCopyBytes, stdout, version
	o.Notice = func(msg string) { fmt.Fprintf(stderr, "imgpipe: %s\n", msg) }
	if f.json {
		o.Text = stderr
		o.Record = func(r *bench.Record) error { return json.NewEncoder(stdout).Encode(r) }
	}
	var errs []error
	if !slices.Contains([]string{"auto", "cpu", "cuda"}, f.device) {
		errs = append(errs, fmt.Errorf("--device %q: want auto, cpu or cuda", f.device))
	}
	// The same check as run's --gpu and a job's execution.gpu.
	if err := new(pipeline.Execution).Set("gpu", f.gpu); err != nil {
		errs = append(errs, fmt.Errorf("--gpu: %w", err))
	}
	var err error
	if o.Streams, err = bench.ParseList(f.streams, 1, sched.MaxStreams); err != nil {
		errs = append(errs, fmt.Errorf("--streams: %w", err))
	}
	if o.Batch, err = bench.ParseList(f.batch, 1, sched.MaxBatch); err != nil {
		errs = append(errs, fmt.Errorf("--batch: %w", err))
	}
	if o.Width, o.Height, err = bench.ParseSize(f.size); err != nil {
		errs = append(errs, fmt.Errorf("--size: %w", err))
	}
	errs = append(errs, o.Check()...)
	sigmaSet, chainSet := cmd.Flags().Changed("sigma"), cmd.Flags().Changed("chain")
	if sigmaSet && (!(f.sigma > 0) || f.sigma > 32) {
		errs = append(errs, fmt.Errorf("--sigma %g out of range (0, 32]", f.sigma))
	}
	spec := f.chain
	switch {
	case chainSet && sigmaSet:
		errs = append(errs, errors.New("--sigma sets the default chain's blur; with --chain, write blur sigma=S in the chain"))
	case !chainSet:
		spec = bench.DefaultChain(f.sigma)
	}
	if len(errs) > 0 {
		return nil, &exitError{code: exitUsage, err: pipeline.ErrorList(errs)}
	}
	if o.Trace != "" && len(o.Streams)*len(o.Batch) > 1 {
		return nil, usageError("--trace records one configuration; give one --streams and one --batch value")
	}
	if o.Chain, err = bench.ParseChain(spec); err != nil {
		printSpecErrors(stderr, spec, err)
		return nil, reported{code: exitUsage}
	}
	return &o, nil
}

// withDevice opens --device (as 'imgpipe run' does), runs measure on it and closes it.
func (f *benchFlags) withDevice(ctx context.Context, o *bench.Options, need string, stderr io.Writer, measure func() error) error {
	tgt, err := resolveDevice(f.device, f.gpu, need, stderr)
	if err != nil {
		return err
	}
	defer tgt.close()
	o.Device, o.NoGPU = tgt.dev, tgt.why
	return benchError(ctx, measure())
}

// benchError maps a bench error to its exit code: 2 for a bad option, 130 when
// interrupted, 3 otherwise (a device fault, say).
func benchError(ctx context.Context, err error) error {
	var oe *bench.OptionError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &oe):
		return &exitError{code: exitUsage, err: oe.Err}
	case ctx.Err() != nil:
		return &exitError{code: exitInterrupted, err: fmt.Errorf("interrupted: %w", err)}
	}
	return fatalError("%v", err)
}
