package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/imgpipe/imgpipe/pipeline"
	"github.com/imgpipe/imgpipe/stages"
)

// runFlags are `imgpipe run`'s flags; the execution ones share names (with '-' for '_')
// and validation with the YAML job's execution mapping.
type runFlags struct {
	input, output, spec, report string
	device, onError, trace      string
	streams, batch, workers     int
	resume, quiet               bool
}

const defaultReportName = "imgpipe-report.jsonl"

func newRunCmd(stderr io.Writer) *cobra.Command {
	var f runFlags
	cmd := &cobra.Command{
		Use:   "run [JOB.yaml] [flags]",
		Short: "Run a pipeline over a folder of images",
		Long: `Run a chain of stages over every image file under the input folder (recursively,
in sorted order; files are taken by extension: jpg jpeg png gif bmp tif tiff webp).
Outputs go to the output folder at the same relative path with the extension of
the save format. When several images in one folder share a name (a.jpg, a.png),
each is saved as a.jpg.png, a.png.png so that nothing is overwritten.

The report (default OUT/imgpipe-report.jsonl) has one JSON line per input, in
input order, and a last {"summary":{...}} line:

  {"input":"a/b.jpg","output":"a/b.png","status":"ok","width":1920,"height":1080,"histogram":[...]}
  {"input":"bad.jpg","status":"failed","error":"decode: unexpected EOF"}

The chain comes from -p or from a YAML job file. Flags override the job, field by
field (-o does not move a report path the job sets); paths in a job are relative
to the working directory, like those of flags:

  input:  {dir: photos}
  pipeline:
    - decode
    - grayscale
    - blur: {sigma: 1.5}
    - save: {format: png}
  output: {dir: out, report: out/imgpipe-report.jsonl}
  execution: {device: auto, workers: 0, on_error: skip}

Exit status: 0 all inputs ok; 1 some failed (the rest were done); 2 usage, spec
or job error (nothing processed); 3 fatal runtime error; 130 interrupted (outputs
in progress are finished or removed, and the report covers what was done).`,
		Example: `  imgpipe run -i photos -o out -p 'decode | grayscale | blur sigma=1.5 | transpose | histogram | save format=png'
  imgpipe run -i photos -o thumbs -p 'decode | boxblur radius=2 | save format=jpeg quality=90' --workers 2
  imgpipe run samples/job.yaml --resume        # skip what the previous report says is done
  imgpipe run job.yaml -o other-out --on-error fail --quiet`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runRun(cmd, args, &f, stderr)
		},
	}
	fl := cmd.Flags()
	fl.StringVarP(&f.input, "input", "i", "", "input folder, walked recursively")
	fl.StringVarP(&f.output, "output", "o", "", "output folder (created if missing)")
	fl.StringVarP(&f.spec, "pipeline", "p", "", "the chain, e.g. 'decode | grayscale | save' (see 'imgpipe stages')")
	fl.StringVar(&f.report, "report", "", "JSON Lines report file (default OUT/"+defaultReportName+")")
	fl.StringVar(&f.device, "device", "auto", "auto, cpu or cuda: where pixel stages run")
	fl.IntVar(&f.streams, "streams", 4, "CUDA streams (GPU only), 1..64")
	fl.IntVar(&f.batch, "batch", 16, "images per GPU batch (GPU only), 1..4096")
	fl.IntVar(&f.workers, "workers", 0, "images processed at once on the CPU; 0 means one per core")
	fl.BoolVar(&f.resume, "resume", false, "skip inputs the previous report lists as ok whose output exists")
	fl.StringVar(&f.onError, "on-error", "skip", "skip: report a failed input and go on (exit 1); fail: stop at the first failure")
	fl.StringVar(&f.trace, "trace", "", "write a Chrome trace-event timeline (JSON) to this file")
	fl.BoolVarP(&f.quiet, "quiet", "q", false, "no progress bar, no summary line")
	return cmd
}

// config is a run's complete configuration: the job file (if any) with the flags applied.
type config struct {
	job  *pipeline.Job
	plan *pipeline.Plan
}

// loadConfig merges the job file and the flags and checks the result; every error is a
// usage error (exit 2) since nothing has run yet.
func loadConfig(cmd *cobra.Command, args []string, f *runFlags, stderr io.Writer) (*config, error) {
	job := &pipeline.Job{Exec: pipeline.DefaultExecution()}
	if len(args) == 1 {
		j, err := pipeline.LoadJob(args[0])
		if err != nil {
			return nil, &exitError{code: exitUsage, err: err}
		}
		job = j
	}
	changed := cmd.Flags().Changed
	var errs []error
	if changed("input") {
		job.InputDir = f.input
	}
	if changed("output") {
		job.OutputDir = f.output
	}
	if changed("report") {
		job.Report = f.report
	}
	if changed("pipeline") {
		steps, err := pipeline.ParseSpec(f.spec)
		if err != nil {
			printSpecErrors(stderr, f.spec, err)
			return nil, reported{code: exitUsage}
		}
		job.Steps = steps
	}
	set := func(flag, setting string, v any) {
		if changed(flag) {
			if err := job.Exec.Set(setting, v); err != nil {
				errs = append(errs, fmt.Errorf("--%s: %w", flag, err))
			}
		}
	}
	set("device", "device", f.device)
	set("streams", "streams", f.streams)
	set("batch", "batch", f.batch)
	set("workers", "workers", f.workers)
	set("on-error", "on_error", f.onError)
	set("resume", "resume", f.resume)
	set("trace", "trace", f.trace)
	if err := job.Complete(); err != nil {
		errs = append(errs, pipeline.Errors(err)...)
	}
	if len(errs) > 0 {
		return nil, &exitError{code: exitUsage, err: pipeline.ErrorList(errs)}
	}
	plan, err := pipeline.Compile(job.Steps)
	if err != nil {
		return nil, &exitError{code: exitUsage, err: err}
	}
	if err := checkFolders(job); err != nil {
		return nil, err
	}
	return &config{job: job, plan: plan}, nil
}

// checkFolders checks the input folder and that the output folder is not the input folder
// (outputs would land among the inputs, and the walk skips the output folder).
func checkFolders(job *pipeline.Job) error {
	at := func(field string) string {
		if job.File == "" {
			return ""
		}
		return job.PosOf(field).String() + ": "
	}
	fi, err := os.Stat(job.InputDir)
	if err != nil {
		return usageError("%sinput folder: %v", at("input.dir"), err)
	}
	if !fi.IsDir() {
		return usageError("%sinput folder %s is not a folder", at("input.dir"), job.InputDir)
	}
	if job.OutputDir != "" {
		if fo, err := os.Stat(job.OutputDir); err == nil && os.SameFile(fi, fo) {
			return usageError("%sthe output folder is the input folder; choose another (it may lie inside the input folder)", at("output.dir"))
		}
	}
	return nil
}

// resolveDevice turns --device into the device pixel stages run on.
//
// Hook for issue 4: "auto" must probe CUDA here, use the GPU when one works, and otherwise
// say once on stderr that it runs on the CPU; "cuda" must open the GPU or fail saying why.
func resolveDevice(requested string) (string, error) {
	switch requested {
	case "cpu", "auto":
		return "cpu", nil
	case "cuda":
		return "", fatalError("--device cuda: the CUDA execution path is not wired into 'imgpipe run' yet; use --device cpu")
	}
	return "", usageError("unknown device %q", requested)
}

func runRun(cmd *cobra.Command, args []string, f *runFlags, stderr io.Writer) error {
	cfg, err := loadConfig(cmd, args, f, stderr)
	if err != nil {
		return err
	}
	job, plan := cfg.job, cfg.plan
	device, err := resolveDevice(job.Exec.Device)
	if err != nil {
		return err
	}
	if job.OutputDir != "" {
		if err := os.MkdirAll(job.OutputDir, 0o755); err != nil {
			return fatalError("output folder: %v", err)
		}
	}
	reportPath := job.Report
	if reportPath == "" {
		reportPath = filepath.Join(job.OutputDir, defaultReportName)
	}
	start := time.Now()
	tr, err := openTrace(job.Exec.Trace, start)
	if err != nil {
		return err
	}

	var src pipeline.Source = pipeline.Folder(job.InputDir, job.OutputDir)
	if job.Exec.Resume {
		prev, err := os.Open(reportPath)
		switch {
		case err == nil:
			defer prev.Close()
			ext := ""
			if plan.Save != nil {
				ext = plan.Save.Ext
			}
			src = pipeline.Resume(src, prev, job.OutputDir, ext)
		case errors.Is(err, os.ErrNotExist):
			if !f.quiet {
				fmt.Fprintf(stderr, "imgpipe: --resume: no previous report at %s; processing every input\n", reportPath)
			}
		default:
			return fatalError("--resume: %v", err)
		}
	}
	var sink pipeline.Sink = pipeline.ToFolder(job.OutputDir)

	ui := newProgress(stderr, f.quiet, job.InputDir, job.OutputDir)
	opt := pipeline.Options{
		Workers:     job.Exec.Workers,
		StopOnError: job.Exec.OnError == "fail",
		Device:      device,
		Progress:    ui.update,
	}
	if tr != nil {
		opt.Trace = tr.w
	}
	var (
		sum    pipeline.Summary
		runErr error
	)
	// The report is written through a temporary file renamed at the end, so it is never
	// half-written, even when the run is interrupted.
	werr := stages.WriteFileAtomic(reportPath, func(w io.Writer) error {
		opt.Report = w
		sum, runErr = pipeline.Run(cmd.Context(), plan, src, sink, opt)
		return nil
	})
	ui.finish()
	if tr != nil {
		if err := tr.close(); err != nil {
			fmt.Fprintf(stderr, "imgpipe: %v\n", err)
		}
	}
	if werr != nil {
		return fatalError("report %s: %v", reportPath, werr)
	}
	if !f.quiet {
		ui.printFailures()
		fmt.Fprintln(stderr, summaryLine(sum))
	}
	switch {
	case sum.Interrupted:
		fmt.Fprintf(stderr, "imgpipe: interrupted; the report covers the %d inputs done\n", sum.Total())
		return reported{code: exitInterrupted}
	case runErr != nil && !errors.Is(runErr, pipeline.ErrStopped):
		return fatalError("%v", runErr)
	case sum.Failed > 0:
		if errors.Is(runErr, pipeline.ErrStopped) && !f.quiet {
			fmt.Fprintf(stderr, "imgpipe: %v (on_error: fail)\n", runErr)
		}
		return reported{code: exitSomeFailed}
	}
	return nil
}

// summaryLine is the one-line summary printed on stderr.
func summaryLine(s pipeline.Summary) string {
	noun := "images"
	if s.Total() == 1 {
		noun = "image"
	}
	secs := fmt.Sprintf("%.1fs", s.Seconds)
	if s.Seconds < 1 {
		secs = fmt.Sprintf("%.2fs", s.Seconds) // short runs would all read "0.0s"
	}
	line := fmt.Sprintf("processed %d %s: %d ok, %d failed, %d skipped in %s (%.1f MP/s) on %s",
		s.Total(), noun, s.OK, s.Failed, s.Skipped, secs, s.MegapixelsPerSecond, s.Device)
	if s.Streams > 0 {
		line += fmt.Sprintf(" (%d streams, batch %d)", s.Streams, s.Batch)
	}
	return line
}
