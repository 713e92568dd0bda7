package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"time"

	"github.com/spf13/cobra"

	"github.com/imgpipe/imgpipe/bench"
	"github.com/imgpipe/imgpipe/pipeline"
	"github.com/imgpipe/imgpipe/pipeline/folderrun"
)

// benchCopyBytes is the buffer the copy limit is measured with; 0 is bench.DefaultCopyBytes
// (tests on a fake device make it small, to stay fast).
var benchCopyBytes = 0

// benchCopyWarmup is how long the copy limit's measure warms up; 0 is
// bench.DefaultCopyWarmup (tests shorten it).
var benchCopyWarmup time.Duration

// benchFlags are the options every bench mode shares (persistent flags of `imgpipe bench`);
// those bench.Options takes as they are go straight into o. The execution settings' flags
// (--device, --gpu, --streams, --batch, files' --workers and --pinned-mb) derive from
// pipeline's settings table, as run's do; options checks them into exec.
type benchFlags struct {
	chain, size, streams, batch string // streams and batch: "2" or a list, "1,2,4,8"
	cpuProfile                  string
	sigma                       float64
	json                        bool
	o                           bench.Options
	exec                        pipeline.Execution
}

func newBenchCmd(stdout, stderr io.Writer) *cobra.Command {
	var f benchFlags
	cmd := withHelp("bench", &cobra.Command{
		Use:   "bench raw|files DIR|decode DIR|copy [flags]",
		Short: "Measure throughput: the engine on raw frames, a folder end to end, copy bandwidth",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return usageError("bench needs a mode: raw, files DIR or copy (see 'imgpipe bench --help')")
		},
	})
	pf := cmd.PersistentFlags()
	settingFlags(cmd, true, "device", "gpu")
	ps, _ := pipeline.ExecutionSetting("streams") // lists to sweep, each value checked by the table (bench.ParseList)
	pf.StringVar(&f.streams, "streams", fmt.Sprint(ps.Default), pipeline.SettingUsage(ps)+", or a list to sweep: 1,2,4,8")
	ps, _ = pipeline.ExecutionSetting("batch")
	pf.StringVar(&f.batch, "batch", fmt.Sprint(ps.Default), pipeline.SettingUsage(ps)+", or a list to sweep: 4,8,16,32")
	pf.StringVar(&f.chain, "chain", "", "pixel stages to run (default \""+bench.DefaultChain(bench.DefaultSigma)+"\")")
	pf.Float64Var(&f.sigma, "sigma", bench.DefaultSigma, "blur sigma of the default chain")
	pf.StringVar(&f.size, "size", "1920x1080", "raw frame size WxH")
	pf.IntVar(&f.o.Frames, "frames", 1024, "frames per timed run (raw); files: only the first N files when given (0: all)")
	pf.IntVar(&f.o.Warmup, "warmup", 1, "untimed runs before timing")
	pf.IntVar(&f.o.Repeats, "repeats", 5, "timed runs; the median is reported")
	pf.StringVar(&f.o.Trace, "trace", "", "write a Chrome trace-event timeline of the last timed run (one configuration only)")
	pf.BoolVar(&f.json, "json", false, "one JSON line per configuration on stdout (peers' schema)")
	pf.StringVar(&f.cpuProfile, "cpuprofile", "", "write a Go CPU profile of the measurement to FILE, for 'go tool pprof'")
	cmd.AddCommand(f.rawCmd(stdout, stderr), f.filesCmd(stdout, stderr), f.decodeCmd(stdout, stderr), f.copyCmd(stdout, stderr), f.serveCmd(stdout, stderr))
	return cmd
}

// rawCmd is `imgpipe bench raw`.
func (f *benchFlags) rawCmd(stdout, stderr io.Writer) *cobra.Command {
	var rc bench.RawConfig
	raw := withHelp("bench-raw", &cobra.Command{
		Use:   "raw [flags]",
		Short: "The engine alone: RGB frames in page-locked memory through the GPU executor",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			o, err := f.options(cmd, stdout, stderr)
			if err != nil {
				return err
			}
			pool, err := rc.Pool(o)
			if err != nil {
				return benchError(cmd.Context(), err)
			}
			return f.withDevice(cmd.Context(), o, "", true, stderr, func() error { return bench.Raw(cmd.Context(), *o, rc, pool) })
		},
	})
	fl := raw.Flags()
	fl.StringVar(&rc.FramesFile, "frames-file", "", "raw RGB frames back to back, as bench/peers/common.py --out writes them")
	fl.IntVar(&rc.PoolSize, "pool", 64, "distinct random frames cycled through (without --frames-file)")
	fl.Uint64Var(&rc.Seed, "seed", 1, "seed of the random frames")
	fl.IntVar(&rc.MaxPoolMB, "max-pool-mb", 4096, "refuse a frame pool (or --frames-file) larger than this")
	fl.BoolVar(&rc.Pageable, "pageable", false, "slots in ordinary (pageable) memory: synchronous copies, no overlap")
	fl.BoolVar(&rc.NoCPU, "no-cpu", false, "skip the CPU run that gives the GPU/CPU ratio")
	fl.IntVar(&rc.CPUFrames, "cpu-frames", 0, "frames per CPU run (default 8 per core, at most --frames)")
	fl.IntVar(&rc.Workers, "workers", 0, "CPU worker goroutines (default one per core)")
	return raw
}

// filesCmd is `imgpipe bench files`.
func (f *benchFlags) filesCmd(stdout, stderr io.Writer) *cobra.Command {
	var fc bench.FilesConfig
	files := withHelp("bench-files", &cobra.Command{
		Use:   "files DIR [flags]",
		Short: "End to end over a folder: decode, the chain, save as PNG",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o, err := f.folderOptions(cmd, stdout, stderr)
			if err != nil {
				return err
			}
			fc.Dir, fc.Workers, fc.PinnedMB = args[0], f.exec.Workers, f.exec.PinnedMB
			fb, err := bench.NewFiles(fc, o.Chain)
			if err != nil {
				return benchError(cmd.Context(), err)
			}
			defer fb.Close()
			return f.withDevice(cmd.Context(), o, "", false, stderr, func() error { return fb.Run(cmd.Context(), *o) })
		},
	})
	files.Flags().StringVar(&fc.Out, "out", "", "output folder (default: a temporary folder, removed at the end)")
	settingFlags(files, false, "workers", "pinned_mb")
	return files
}

// decodeCmd is `imgpipe bench decode`.
func (f *benchFlags) decodeCmd(stdout, stderr io.Writer) *cobra.Command {
	return withHelp("bench-decode", &cobra.Command{
		Use:   "decode DIR [flags]",
		Short: "JPEG decoding alone, per decoder: go, turbo, and the GPU's batched decode",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o, err := f.folderOptions(cmd, stdout, stderr)
			if err != nil {
				return err
			}
			return f.withDevice(cmd.Context(), o, "", false, stderr, func() error {
				_, err := bench.Decode(cmd.Context(), *o, args[0])
				return err
			})
		},
	})
}

// copyCmd is `imgpipe bench copy`.
func (f *benchFlags) copyCmd(stdout, stderr io.Writer) *cobra.Command {
	return withHelp("bench-copy", &cobra.Command{
		Use:   "copy [flags]",
		Short: "Page-locked and pageable copy bandwidth, and a one-batch profile of the chain",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			o, err := f.options(cmd, stdout, stderr)
			switch {
			case err != nil:
				return err
			case f.exec.Device == "cpu":
				return usageError("bench copy measures a GPU's copies; --device cpu leaves nothing to measure")
			case o.Trace != "":
				return usageError("--trace: bench copy records no timeline; use bench raw --trace")
			}
			return f.withDevice(cmd.Context(), o, "bench copy needs a GPU", false, stderr, func() error {
				rec, err := bench.Copy(cmd.Context(), *o)
				if err == nil && f.json {
					if err = json.NewEncoder(stdout).Encode(rec); err != nil {
						err = fmt.Errorf("writing the record: %w", err)
					}
				}
				return err
			})
		},
	})
}

// serveCmd is `imgpipe bench serve`: the flags and the run are bench.ServeConfig's.
func (f *benchFlags) serveCmd(stdout, stderr io.Writer) *cobra.Command {
	var sc bench.ServeConfig
	serve := withHelp("bench-serve", &cobra.Command{
		Use:   "serve DIR [flags]",
		Short: "Requests from concurrent clients: to an engine here, an 'imgpipe serve' (--url) or a peer (--get)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o, err := f.options(cmd, stdout, stderr)
			if err != nil {
				return err
			}
			if len(o.Streams) != 1 || len(o.Batch) != 1 {
				return usageError("--streams, --batch: bench serve runs one configuration; give one value each")
			}
			sc.Dir, sc.Exec, sc.GPUs, sc.Text, sc.Notice = args[0], f.exec, gpus(true, ""), o.Text, o.Notice
			sc.Exec.Streams, sc.Exec.Batch = o.Streams[0], o.Batch[0]
			if f.json {
				sc.JSON = stdout
			}
			_, err = bench.Serve(cmd.Context(), sc)
			return benchError(cmd.Context(), err)
		},
	})
	sc.Flags(serve.Flags())
	settingFlags(serve, false, "workers", "pinned_mb")
	return serve
}

// folderOptions is options for the modes over a folder: every file, unless --frames says
// otherwise.
func (f *benchFlags) folderOptions(cmd *cobra.Command, stdout, stderr io.Writer) (*bench.Options, error) {
	o, err := f.options(cmd, stdout, stderr)
	if err == nil && !cmd.Flags().Changed("frames") {
		o.Frames = 0
	}
	return o, err
}

// options checks the shared flags into bench.Options. Every error is a usage error naming
// the flag. With --json, records go to stdout as JSON lines and the table to stderr;
// otherwise the table goes to stdout.
func (f *benchFlags) options(cmd *cobra.Command, stdout, stderr io.Writer) (*bench.Options, error) {
	o := f.o
	o.CopyBytes, o.CopyWarmup, o.Text, o.Version = benchCopyBytes, benchCopyWarmup, stdout, version
	o.Notice = func(msg string) { fmt.Fprintf(stderr, "imgpipe: %s\n", msg) }
	if f.json {
		o.Text = stderr
		o.Record = func(r *bench.Record) error { return json.NewEncoder(stdout).Encode(r) }
	}
	f.exec = pipeline.DefaultExecution()
	errs := setFlags(cmd, &f.exec) // the same checks as run's flags and a job's execution
	var err error
	if o.Streams, err = bench.ParseList(f.streams, "streams"); err != nil {
		errs = append(errs, fmt.Errorf("--streams: %w", err))
	}
	if o.Batch, err = bench.ParseList(f.batch, "batch"); err != nil {
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
// several allows --gpu to name more than one GPU (bench raw's scaling); the other modes
// measure one.
func (f *benchFlags) withDevice(ctx context.Context, o *bench.Options, need string, several bool, stderr io.Writer, measure func() error) (err error) {
	if g := f.exec.GPU; len(g.Ordinals()) != 1 && !several {
		return usageError("--gpu %s: this mode measures one GPU; name one (bench raw takes several)", g)
	}
	devs, err := folderrun.OpenDevices(f.exec.Device, f.exec.GPU, gpus(true, need), func(msg string) { fmt.Fprintf(stderr, "imgpipe: %s\n", msg) })
	if err != nil {
		return err
	}
	defer devs.Close()
	o.NoGPU = devs.Why
	if len(devs.GPUs) > 0 {
		o.Device, o.Others = devs.GPUs[0], devs.GPUs[1:]
	}
	if f.cpuProfile != "" {
		stop, err := startCPUProfile(f.cpuProfile)
		if err != nil {
			return err
		}
		defer func() { err = errors.Join(err, stop()) }()
	}
	return benchError(ctx, measure())
}

// startCPUProfile starts a Go CPU profile written to path; stop ends it and closes the
// file.
func startCPUProfile(path string) (stop func() error, err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, usageError("--cpuprofile: %v", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, usageError("--cpuprofile: %v", err)
	}
	return func() error {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			return fatalError("--cpuprofile: %v", err)
		}
		return nil
	}, nil
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
