package main

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/imgpipe/imgpipe/cmd/imgpipe/internal/printer"
	"github.com/imgpipe/imgpipe/cmd/imgpipe/internal/selectflags"
	"github.com/imgpipe/imgpipe/pipeline"
	"github.com/imgpipe/imgpipe/pipeline/folderrun"
	"github.com/imgpipe/imgpipe/pipeline/job"
)

// runFlags are `imgpipe run`'s own flags; the execution settings' flags derive from
// pipeline's settings table (settingFlags), as the YAML job's execution mapping does.
type runFlags struct {
	spec     string
	quiet    bool
	null     bool   // -0: the list on stdin is NUL-separated
	name     string // --name: the outputs' name template
	dryRun   bool
	progress string
	inputs   selectflags.Flags
	// server and tokenFile send the run to an imgpipe serve (runRemote).
	server, tokenFile string
}

func newRunCmd(stdout, stderr io.Writer) *cobra.Command {
	var f runFlags
	cmd := withHelp("run", &cobra.Command{
		Use:   "run [JOB.yaml] [flags]",
		Short: "Run a pipeline over a folder of images",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runRun(cmd, args, &f, stdout, stderr)
		},
	})
	jobFlags(cmd, &f)
	settingFlags(cmd, false)
	fl := cmd.Flags()
	fl.StringVar(&f.name, "name", "", "name outputs by `TEMPLATE`: {stem} (the input's name without extension) and {ext} (the format's), e.g. {stem}_256.{ext}")
	fl.BoolVarP(&f.dryRun, "dry-run", "n", false, "list every input with its output name (and what --resume would skip); write nothing")
	fl.StringVar(&f.progress, "progress", progressAuto, "progress on stderr: auto (a bar on a terminal), json (every stderr line a JSON object: docs/progress-json.md), none")
	registerEnum(cmd, "progress", progressModes...)
	fl.StringVar(&f.server, "server", "", "run on the 'imgpipe serve' at this URL, its paths absolute there")
	fl.StringVar(&f.tokenFile, "token-file", "", "with --server: file holding the server's bearer token [$IMGPIPE_TOKEN]")
	return cmd
}

// jobFlags registers the flags that loadConfig merges into a job: the folders, the input
// selection, the chain and the report, and --quiet.
func jobFlags(cmd *cobra.Command, f *runFlags) {
	fl := cmd.Flags()
	fl.StringP("input", "i", "", "input folder (walked recursively) or bucket URL, one image file, or - to read a list of paths from stdin")
	fl.StringP("output", "o", "", "output folder (created if missing) or bucket URL")
	fl.StringVarP(&f.spec, "pipeline", "p", "", "the chain, e.g. 'decode | grayscale | save' (see 'imgpipe stages')")
	fl.String("report", "", "JSON Lines report file (default OUT/"+folderrun.ReportName+"; - for stdout, "+folderrun.NoReport+" for none)")
	fl.BoolVarP(&f.null, "null", "0", false, "with -i -: each path on stdin ends with a NUL byte (find -print0), as xargs -0 reads them")
	f.inputs.Register(cmd.Flags())
	fl.BoolVarP(&f.quiet, "quiet", "q", false, "no progress bar, no summary line")
}

// loadConfig merges the job file and the flags into a run's complete request, and checks
// the settings and compiles the chain; every error is a usage error (exit 2) since nothing
// has run yet. The paths are checked, and the inputs opened, by folderrun.Prepare.
func loadConfig(cmd *cobra.Command, args []string, f *runFlags, stderr io.Writer) (*job.Job, folderrun.Request, error) {
	var req folderrun.Request
	job, err := readJob(args)
	if err != nil {
		return nil, req, &exitError{code: exitUsage, err: err}
	}
	// Only the flags set override the job. A new output folder takes the job's report
	// along (the same place relative to it, or the default there), so that overriding -o
	// never writes over the report of the job's own output folder.
	if cmd.Flags().Changed("output") && !cmd.Flags().Changed("report") && job.Report != "" {
		job.Report = moveReport(job.Report, job.OutputDir, cmd.Flags().Lookup("output").Value.String())
	}
	for name, to := range map[string]*string{"input": &job.InputDir, "output": &job.OutputDir, "report": &job.Report} {
		if fl := cmd.Flags().Lookup(name); fl.Changed {
			*to = fl.Value.String()
		}
	}
	plan := job.Plan // bound once, by job.Load
	if cmd.Flags().Changed("pipeline") {
		if plan, err = pipeline.CompileSpec(f.spec); err != nil {
			printSpecErrors(stderr, f.spec, err)
			return nil, req, reported{code: exitUsage}
		}
		job.Steps = plan.Steps
	}
	errs := setFlags(cmd, &job.Exec)
	if err := job.Complete(); err != nil {
		errs = append(errs, pipeline.Errors(err)...)
	}
	sel, err := f.inputs.Selection(time.Now())
	errs = append(errs, pipeline.Errors(err)...)
	if err := sel.Check(); err != nil {
		errs = append(errs, pipeline.Errors(err)...)
	}
	if cmd.Flags().Lookup("progress") != nil && !slices.Contains(progressModes, f.progress) {
		errs = append(errs, fmt.Errorf("--progress %q: want one of %s", f.progress, strings.Join(progressModes, ", ")))
	}
	if len(errs) > 0 {
		return nil, req, &exitError{code: exitUsage, err: pipeline.ErrorList(errs)}
	}
	req = jobRequest(job)
	req.Plan, req.Selection, req.Stdin, req.Stdout, req.NullList, req.Name = plan, sel, cmd.InOrStdin(), cmd.OutOrStdout(), f.null, f.name
	pr := printer.Of(stderr)
	req.GPUs, req.Notice = gpus(false, ""), pr.Warning
	if !f.quiet {
		req.Info = pr.Notice
	}
	return job, req, nil
}

// jobRequest is the request of a job's folders, report and settings, its chain aside.
func jobRequest(j *job.Job) folderrun.Request {
	r := folderrun.Request{Plan: j.Plan, Input: j.InputDir, Output: j.OutputDir, Report: j.Report, Exec: j.Exec}
	if j.File != "" {
		r.Pos = j.PosOf
	}
	return r
}

// readJob loads the job file args names, or, with none, returns an empty job with the
// default execution settings for the flags to fill.
func readJob(args []string) (*job.Job, error) {
	if len(args) == 1 {
		return job.Load(args[0])
	}
	return &job.Job{Exec: pipeline.DefaultExecution()}, nil
}

// moveReport is the report path of a job whose output folder moves from oldOut to newOut:
// the same place relative to the output folder when it lay inside it, otherwise the
// default in newOut.
func moveReport(report, oldOut, newOut string) string {
	if rel, err := filepath.Rel(oldOut, report); err == nil && filepath.IsLocal(rel) {
		return filepath.Join(newOut, rel)
	}
	return filepath.Join(newOut, folderrun.ReportName)
}

// runRun runs the job through folderrun, showing its progress, and prints what it did.
func runRun(cmd *cobra.Command, args []string, f *runFlags, stdout, stderr io.Writer) error {
	ctx := cmd.Context()
	printer.Of(stderr).SetJSON(f.progress == progressJSON)
	j, req, err := loadConfig(cmd, args, f, stderr)
	if err != nil {
		return err
	}
	if f.server != "" {
		return runRemote(ctx, j, f, stderr)
	}
	var p *folderrun.Prepared
	var ui *progress
	stopNotice := func() {}
	req.Progress = func(r *pipeline.Result) { ui.update(r) }
	req.Starting = func(src pipeline.Source) pipeline.Source {
		ui = newProgress(stderr, f.quiet, f.progress, p.Count)
		// The first Ctrl-C cancels the context: say at once what happens now.
		stopNotice = ui.onInterrupt(ctx)
		return ui.source(src)
	}
	if p, err = folderrun.Prepare(ctx, req); err != nil {
		return err
	}
	defer p.Close()
	if f.dryRun {
		src, closePrev, err := p.DryRun(ctx)
		if err != nil {
			return err
		}
		defer closePrev()
		return dryRun(ctx, src, req.Plan.Save, stdout, stderr, f.quiet)
	}
	sum, err := p.Run(ctx)
	stopNotice()
	if ui == nil { // it failed before the first input
		return err
	}
	ui.finish()
	// What failed once the run was done (the report's rename, the trace) never hides what
	// the run did: the failures and the summary are printed first. A run that did nothing
	// has no summary: its error, or the notice that nothing was selected, says it all.
	ui.printFailures()
	if !f.quiet && sum.Total() > 0 {
		printSummary(stderr, "", sum)
	}
	return runOutcome(sum, err, p.ReportPath(), stderr)
}

// runOutcome is the exit of a run that started: the error of one that failed, or the code
// of one interrupted (saying what the report holds) or with failed inputs.
func runOutcome(sum pipeline.Summary, err error, report string, stderr io.Writer) error {
	switch {
	case errors.As(err, new(*folderrun.RequestError)), errors.As(err, new(*folderrun.RunError)):
		return err
	case sum.Interrupted && err != nil && sum.Total() == 0:
		fmt.Fprintf(stderr, "imgpipe: interrupted before any input was done; the report at %s was left as it was\n", report)
		return reported{code: exitInterrupted}
	case sum.Interrupted:
		fmt.Fprintf(stderr, "imgpipe: interrupted; the report covers the %d inputs done (--resume carries on)\n", sum.Total())
		return reported{code: exitInterrupted}
	case sum.Failed > 0:
		if errors.Is(err, pipeline.ErrStopped) {
			fmt.Fprintf(stderr, "imgpipe: %v (on_error: fail)\n", err)
		}
		return reported{code: exitSomeFailed}
	case sum.Total() == 0 && err == nil:
		printer.Of(stderr).Warning(fmt.Sprintf("no input selected (the input holds no file the chain reads, or the selection flags took none): nothing was done (exit %d)", exitNoInputs))
		return reported{code: exitNoInputs}
	}
	return nil
}

// printSummary prints a summary line, after prefix, for run, wait and worker alike: the
// summary completed as a report's is (its megapixels per second), so that line and report
// agree.
func printSummary(stderr io.Writer, prefix string, s pipeline.Summary) {
	printer.Of(stderr).Summary(prefix+summaryLine(s.Final()), s.Final())
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
		line += fmt.Sprintf(" (%d streams, batch %d", s.Streams, s.Batch)
		if s.Batches > 0 {
			line += fmt.Sprintf("; %d batches%s, H2D %.3fs, kernels %.3fs, D2H %.3fs in %.3fs of device time, overlap efficiency %.2f",
				s.Batches, perGPU(s.GPUs), s.H2DSeconds, s.KernelSeconds, s.D2HSeconds, s.DeviceWallSeconds, s.Overlap)
		}
		if s.CPUFallback > 0 {
			line += fmt.Sprintf("; %d too large for a slot, run on the CPU", s.CPUFallback)
		}
		if s.CPUStart > 0 {
			line += fmt.Sprintf("; %d run on the CPU while the GPU opened", s.CPUStart)
		}
		line += ")"
	}
	if s.GPUNotStarted {
		line += " (auto: the GPU was not started, the CPU alone finished sooner)"
	}
	return line
}

// perGPU is how a run over several GPUs shared its batches, " (40 + 38 per GPU)" in the
// order of the summary's device names; "" on one device.
func perGPU(gpus []pipeline.GPUSummary) string {
	if len(gpus) < 2 {
		return ""
	}
	n := make([]string, len(gpus))
	for i, g := range gpus {
		n[i] = strconv.FormatInt(g.Batches, 10)
	}
	return " (" + strings.Join(n, " + ") + " per GPU)"
}
