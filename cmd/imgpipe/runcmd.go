package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/imgpipe/imgpipe/blobio"
	"github.com/imgpipe/imgpipe/cudastage"
	"github.com/imgpipe/imgpipe/cudastage/sched"
	"github.com/imgpipe/imgpipe/pipeline"
	"github.com/imgpipe/imgpipe/pipeline/gpu"
	"github.com/imgpipe/imgpipe/pipeline/job"
	"github.com/imgpipe/imgpipe/stages"
)

// runFlags are `imgpipe run`'s own flags; the execution settings' flags derive from
// pipeline's settings table (settingFlags), as the YAML job's execution mapping does.
type runFlags struct {
	spec     string
	quiet    bool
	dryRun   bool
	progress string
	inputs   inputFlags
}

const defaultReportName = "imgpipe-report.jsonl"

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
	fl.BoolVarP(&f.dryRun, "dry-run", "n", false, "list every input with its output name (and what --resume would skip); write nothing")
	fl.StringVar(&f.progress, "progress", progressAuto, "progress on stderr: auto (a bar on a terminal), json (one JSON line a second), none")
	registerEnum(cmd, "progress", progressModes...)
	return cmd
}

// jobFlags registers the flags that loadConfig merges into a job: the folders, the input
// selection, the chain and the report, and --quiet.
func jobFlags(cmd *cobra.Command, f *runFlags) {
	fl := cmd.Flags()
	fl.StringP("input", "i", "", "input folder (walked recursively) or bucket URL, one image file, or - to read a list of paths from stdin")
	fl.StringP("output", "o", "", "output folder (created if missing) or bucket URL")
	fl.StringVarP(&f.spec, "pipeline", "p", "", "the chain, e.g. 'decode | grayscale | save' (see 'imgpipe stages')")
	fl.String("report", "", "JSON Lines report file (default OUT/"+defaultReportName+")")
	f.inputs.register(cmd)
	fl.BoolVarP(&f.quiet, "quiet", "q", false, "no progress bar, no summary line")
}

// loadConfig merges the job file and the flags into a run's complete configuration, checks
// it and compiles its chain; every error is a usage error (exit 2) since nothing has run yet.
func loadConfig(cmd *cobra.Command, args []string, f *runFlags, stderr io.Writer) (*job.Job, *pipeline.Plan, *inputs, error) {
	job, err := readJob(args)
	if err != nil {
		return nil, nil, nil, &exitError{code: exitUsage, err: err}
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
	if cmd.Flags().Changed("pipeline") {
		plan, err := pipeline.CompileSpec(f.spec)
		if err != nil {
			printSpecErrors(stderr, f.spec, err)
			return nil, nil, nil, reported{code: exitUsage}
		}
		job.Steps = plan.Steps
	}
	errs := setFlags(cmd, &job.Exec)
	if err := job.Complete(); err != nil {
		errs = append(errs, pipeline.Errors(err)...)
	}
	sel := f.inputs.selection()
	if err := sel.Check(); err != nil {
		errs = append(errs, pipeline.Errors(err)...)
	}
	if cmd.Flags().Lookup("progress") != nil && !slices.Contains(progressModes, f.progress) {
		errs = append(errs, fmt.Errorf("--progress %q: want one of %s", f.progress, strings.Join(progressModes, ", ")))
	}
	if len(errs) > 0 {
		return nil, nil, nil, &exitError{code: exitUsage, err: pipeline.ErrorList(errs)}
	}
	plan, err := pipeline.Compile(job.Steps)
	if err != nil {
		return nil, nil, nil, &exitError{code: exitUsage, err: err}
	}
	if err := checkFolders(job); err != nil {
		return nil, nil, nil, err
	}
	if len(sel.Exts) == 0 {
		sel.Exts = plan.InputExts() // load takes .npy files
	}
	in, err := openInputs(cmd.Context(), job, sel, cmd.InOrStdin())
	if err != nil {
		return nil, nil, nil, err
	}
	return job, plan, in, nil
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
	return filepath.Join(newOut, defaultReportName)
}

// reportPath is where the run's report goes: the job's, or the default in the output folder.
func reportPath(job *job.Job) string {
	if job.Report != "" {
		return job.Report
	}
	if blobio.IsURL(job.OutputDir) {
		return strings.TrimSuffix(job.OutputDir, "/") + "/" + defaultReportName // for messages
	}
	return filepath.Join(job.OutputDir, defaultReportName)
}

// checkFolders checks the input folder, the output folder against it, and the report path,
// so that each mistake is a usage error before anything is written:
//   - the output folder is the input folder, or the input folder lies inside the output
//     folder: outputs would land among the inputs and could overwrite them;
//   - the output folder lies inside the input folder and holds files imgpipe did not make
//     (it is not empty and has no imgpipe report): the walk skips it, so those images would
//     be silently left out, and outputs of same-named inputs could overwrite them;
//   - the report or the trace could clobber something (see checkWriteTargets), or
//     --resume has no report file to read (--report -).
func checkFolders(job *job.Job) error {
	at := func(field string) string {
		if job.File == "" {
			return ""
		}
		return job.PosOf(field).String() + ": "
	}
	if err := checkBuckets(job); err != nil {
		return err
	}
	// fi is the input folder's; nil for a single file or a list on stdin, which are not
	// walked (a listed file inside the output folder is not detected).
	var fi os.FileInfo
	if job.InputDir != stdinInput && !blobio.IsURL(job.InputDir) { // a bucket is found when it is opened
		var err error
		if fi, err = os.Stat(job.InputDir); err != nil {
			return usageError("%sinput folder: %v", at("input.dir"), err)
		}
		if !fi.IsDir() && !fi.Mode().IsRegular() {
			return usageError("%sinput %s is neither a folder nor a file", at("input.dir"), job.InputDir)
		}
		if !fi.IsDir() {
			fi = nil
		}
	}
	if job.OutputDir != "" && job.InputDir != stdinInput && !blobio.IsURL(job.OutputDir) {
		fo, err := os.Stat(job.OutputDir)
		if err != nil {
			fo = nil // not there yet: MkdirAll makes it, or says why it cannot
		}
		switch {
		case fo != nil && fi != nil && os.SameFile(fi, fo):
			return usageError("%sthe output folder is the input folder; choose another (it may lie inside the input folder)", at("output.dir"))
		case fo != nil && !fo.IsDir():
			return usageError("%soutput folder %s is not a folder", at("output.dir"), job.OutputDir)
		case within(job.InputDir, job.OutputDir, fo):
			return usageError("%sthe input folder %s lies inside the output folder %s, where outputs could overwrite inputs; choose an output folder outside the input folder",
				at("output.dir"), job.InputDir, job.OutputDir)
		case fo != nil && fi != nil && within(job.OutputDir, job.InputDir, fi):
			if err := checkNestedOutput(job.OutputDir); err != nil {
				return usageError("%s%v", at("output.dir"), err)
			}
		}
	}
	if reportPath(job) == stdoutPath && job.Exec.Resume {
		return usageError("%s--resume reads the previous report, which --report - does not keep; name a report file", at("output.report"))
	}
	if tr := job.Exec.Trace; tr != "" && tr != stdoutPath {
		if fi, err := os.Stat(filepath.Dir(tr)); err != nil || !fi.IsDir() {
			return usageError("%s--trace %s: its folder %s does not exist", at("execution.trace"), tr, filepath.Dir(tr))
		}
	}
	return checkWriteTargets(job, fi)
}

// checkNestedOutput accepts an existing output folder that lies inside the input folder
// only when imgpipe made it: it is empty or holds an imgpipe report.
func checkNestedOutput(out string) error {
	ents, err := os.ReadDir(out)
	if err != nil {
		return fmt.Errorf("output folder: %v", err)
	}
	if len(ents) == 0 {
		return nil
	}
	if _, err := os.Stat(filepath.Join(out, defaultReportName)); err == nil {
		return nil
	}
	return fmt.Errorf("the output folder %s lies inside the input folder and already holds files but no %s, so imgpipe did not make it: "+
		"images in it would not be processed (the walk skips the output folder) and outputs of the same names could overwrite them; "+
		"choose a new or empty output folder, or one outside the input folder", out, defaultReportName)
}

// within reports whether dir is root or lies inside it. With root's FileInfo (root exists)
// it walks up dir's real path (symbolic links resolved) comparing each folder with root by
// identity, so links and different spellings of one folder cannot hide it; otherwise it
// compares the cleaned absolute paths.
func within(dir, root string, rootInfo os.FileInfo) bool {
	if rootInfo != nil {
		p, err := filepath.EvalSymlinks(dir)
		if err == nil {
			p, err = filepath.Abs(p)
		}
		if err == nil {
			for {
				if fi, err := os.Stat(p); err == nil && os.SameFile(fi, rootInfo) {
					return true
				}
				parent := filepath.Dir(p)
				if parent == p {
					return false
				}
				p = parent
			}
		}
	}
	d, err1 := filepath.Abs(dir)
	r, err2 := filepath.Abs(root)
	if err1 != nil || err2 != nil {
		return false
	}
	rel, err := filepath.Rel(r, d)
	return err == nil && filepath.IsLocal(rel) || rel == "."
}

// resumeSource applies --resume to src: the earlier reports mark the inputs they list as
// done under plan, and whose outputs are still there, as skipped (see pipeline.Resume).
// The earlier reports are the files at paths (newest first; those that do not exist are
// passed over) or, when the report goes into the output bucket, that object (a bucket has
// no journal). report is the report's path, for the message when there is none. The
// function returned closes the reports and the output.
func resumeSource(ctx context.Context, src pipeline.Source, plan *pipeline.Plan, job *job.Job, report string, paths []string, quiet bool, stderr io.Writer) (pipeline.Source, func(), error) {
	if !job.Exec.Resume {
		return src, func() {}, nil
	}
	var prev []*os.File
	var err error
	if bucketReport(job) {
		prev, err = fetchReport(ctx, job.OutputDir)
	} else {
		prev, err = openReports(paths...)
	}
	if err != nil {
		return nil, nil, fatalError("--resume: %v", err)
	}
	has, closeOut, err := blobio.Outputs(ctx, job.OutputDir)
	if err != nil {
		closeAll(prev)
		return nil, nil, fatalError("--resume: output: %v", err)
	}
	if len(prev) == 0 && !quiet {
		fmt.Fprintf(stderr, "imgpipe: --resume: no previous report at %s; processing every input\n", report)
	}
	readers := make([]io.Reader, len(prev))
	for i, p := range prev {
		readers[i] = p
	}
	return pipeline.ResumeOutputs(src, plan, has, readers...), func() { closeAll(prev); closeOut() }, nil
}

// fetchReport copies the report object of the output bucket out into a temporary file
// (removed at once; it lives while open), so that resume reads it at its own pace over a
// long run without holding a download open, and while the run writes the object anew. It
// returns no file when there is no report object.
func fetchReport(ctx context.Context, bucket string) ([]*os.File, error) {
	f, err := os.CreateTemp("", "imgpipe-previous-report-*.jsonl")
	if err != nil {
		return nil, err
	}
	os.Remove(f.Name())
	found, err := blobio.CopyObject(ctx, bucket, defaultReportName, f)
	if err == nil && found {
		_, err = f.Seek(0, io.SeekStart)
	}
	if err != nil || !found {
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("the previous report in %s: %v", bucket, err)
		}
		return nil, nil
	}
	return []*os.File{f}, nil
}

// removeTemps removes the temporary files a killed run left (see stages.IsTempName): under
// the output folder, and beside the report for the report's own name. It returns how many
// it removed. Only exact temporary names of WriteFileAtomic are taken, so no user file can
// go.
func removeTemps(outDir, report string) (int, error) {
	n := 0
	if outDir != "" {
		var err error
		if n, err = stages.RemoveTemps(outDir); err != nil {
			return n, err
		}
	}
	m, err := stages.RemoveTempsOf(report)
	return n + m, err
}

func runRun(cmd *cobra.Command, args []string, f *runFlags, stdout, stderr io.Writer) error {
	job, plan, in, err := loadConfig(cmd, args, f, stderr)
	if err != nil {
		return err
	}
	defer in.close()
	ext := ""
	if plan.Save != nil {
		ext = plan.Save.Ext
	}
	if f.dryRun {
		// Before the device is opened and anything is created: a dry run writes nothing.
		// No lock and no journal: the reports are read as they lie, the killed run's
		// journal first, as the real run would read them.
		rp := reportPath(job)
		src, closePrev, err := resumeSource(cmd.Context(), in.source(), plan, job, rp, []string{journalPath(rp), rp}, f.quiet, stderr)
		if err != nil {
			return err
		}
		defer closePrev()
		return dryRun(cmd.Context(), src, ext, stdout, stderr, f.quiet)
	}
	// The device is opened before anything is created, so that --device cuda without a
	// GPU leaves no output folder behind. A chain without pixel stages leaves a GPU nothing
	// to do: auto does not even load the driver then.
	device := job.Exec.Device
	if device == "auto" && len(plan.Pixels) == 0 {
		device = "cpu"
	}
	tgt, err := resolveDevice(device, job.Exec.GPU, "", false, stderr)
	if err != nil {
		return err
	}
	var runErr error
	defer func() {
		// After a device fault the GPU refuses further calls; the run's error says why.
		if err := tgt.close(); err != nil && runErr == nil {
			fmt.Fprintf(stderr, "imgpipe: closing the GPU: %v\n", err)
		}
	}()
	opt := gpu.RunOptions(job.Exec, tgt.devs...)
	gpuOpt, _ := opt.Backend.(*gpu.Options)
	if gpuOpt != nil && gpuOpt.Optional && !gpuOpt.Wait {
		// First, so that a GPU that starts at once (as under cuda) starts as early.
		countForGPU(cmd.Context(), in, gpuOpt, tgt, gpuCountLimit)
	}
	// On a GPU, settings that cannot work together (a batch whose slots do not fit in
	// --pinned-mb) are usage errors, found before anything is written.
	if err := gpu.Check(plan, opt); err != nil {
		if errors.Is(err, cudastage.ErrNoSuchGPU) {
			return noSuchGPU(err)
		}
		if errors.Is(err, gpu.ErrNoDeviceDecoder) && gpuOpt != nil {
			return fatalError("%v", err) // a GPU that cannot load nvJPEG: a runtime problem
		}
		return usageError("%v", err)
	}
	if job.OutputDir != "" && !blobio.IsURL(job.OutputDir) {
		if err := os.MkdirAll(job.OutputDir, 0o755); err != nil {
			return fatalError("output folder: %v", err)
		}
	}
	reportPath := reportPath(job)
	// A report that goes into the output bucket (none named) is written as one object at
	// the end: an object store has no journal, no lock and no temporary files (an object is
	// whole or absent).
	toBucket := bucketReport(job)
	// Everything below writes into the output folder (or the report's folder): under its
	// lock, so that a second run cannot take this one's temporary files or report.
	if dir := lockDir(job.OutputDir, reportPath); dir != "" {
		lock, err := lockFolder(dir)
		if err != nil {
			return fatalError("%v", err)
		}
		defer lock.unlock()
	}
	if reportPath != stdoutPath && !toBucket {
		outDir := job.OutputDir
		if blobio.IsURL(outDir) {
			outDir = ""
		}
		if n, err := removeTemps(outDir, reportPath); err != nil {
			fmt.Fprintf(stderr, "imgpipe: removing temporary files a previous run left: %v\n", err)
		} else if n > 0 && !f.quiet {
			fmt.Fprintf(stderr, "imgpipe: removed %d temporary files a previous run left (it was killed mid-write)\n", n)
		}
	}
	defer pipeline.SetGoMemoryLimit(opt.MemoryBudget)()

	var jr *journal
	opt.Report = cmd.OutOrStdout()
	if reportPath != stdoutPath && !toBucket {
		if err := os.MkdirAll(filepath.Dir(reportPath), 0o755); err != nil {
			return fatalError("report %s: %v", reportPath, err)
		}
		if jr, err = openJournal(reportPath); err != nil {
			return fatalError("report %s: %v", reportPath, err)
		}
		opt.Report = jr.writer()
	}
	var prevPaths []string // --resume needs a report file or object (checkFolders): jr is set for a file
	if jr != nil {
		prevPaths = []string{jr.prev, jr.report}
	}
	src, closePrev, err := resumeSource(cmd.Context(), in.source(), plan, job, reportPath, prevPaths, f.quiet, stderr)
	if err != nil {
		jr.discard()
		return err
	}
	defer closePrev()
	sink := pipeline.Discard() // a report-only chain, e.g. decode | histogram
	if plan.Save != nil {
		out, closeOut, err := blobio.Output(cmd.Context(), job.OutputDir)
		if err != nil {
			jr.discard()
			return fatalError("output: %v", err)
		}
		defer closeOut()
		sink = out
	}

	count := in.count
	if gpuOpt != nil && gpuOpt.Inputs > 0 {
		n := gpuOpt.Inputs // countForGPU walked the inputs already
		count = func() int { return n }
	}
	ui := newProgress(stderr, f.quiet, f.progress, count)
	src = ui.source(src)
	// The first Ctrl-C cancels the context: say at once what happens now.
	stopNotice := ui.onInterrupt(cmd.Context())
	defer stopNotice()
	opt.Device, opt.Progress = "cpu", ui.update
	opt.Notice = func(msg string) { fmt.Fprintf(stderr, "imgpipe: %s\n", msg) }
	var tr *sched.Trace
	if job.Exec.Trace != "" {
		tr = newTrace()
		opt.Trace = tr
	}
	var sum pipeline.Summary
	var bucketErr error
	if toBucket {
		// The object is written only when the run did something: an empty report must not
		// replace the previous one.
		bucketErr = blobio.WriteObject(cmd.Context(), job.OutputDir, defaultReportName, func(w io.Writer) error {
			opt.Report = w
			sum, runErr = pipeline.Run(cmd.Context(), plan, src, sink, opt)
			if runErr != nil && sum.Total() == 0 {
				return errNothingDone
			}
			return nil
		})
		if errors.Is(bucketErr, errNothingDone) {
			bucketErr = nil
		}
	} else {
		sum, runErr = pipeline.Run(cmd.Context(), plan, src, sink, opt)
	}
	stopNotice()
	nothingDone := runErr != nil && sum.Total() == 0
	ui.finish()

	// What can still fail (the report's rename, the trace) never hides what the run did:
	// the failures and the summary are printed first.
	ui.printFailures()
	if !f.quiet {
		fmt.Fprintln(stderr, summaryLine(sum))
	}
	var late []error
	if bucketErr != nil {
		late = append(late, fmt.Errorf("report %s: %v", reportPath, bucketErr))
	}
	switch {
	case jr == nil:
	case nothingDone:
		jr.discard() // an empty report must not replace the previous one
	default:
		if err := jr.commit(); err != nil {
			late = append(late, fmt.Errorf("report %s: %v (the report so far is in %s)", reportPath, err, jr.path))
		}
	}
	if tr != nil {
		if err := writeTrace(tr, job.Exec.Trace, cmd.OutOrStdout()); err != nil {
			late = append(late, fmt.Errorf("--trace %s: %v", job.Exec.Trace, err))
		}
	}
	if len(late) > 0 {
		if runErr != nil && !errors.Is(runErr, pipeline.ErrStopped) && !sum.Interrupted {
			late = append([]error{runErr}, late...)
		}
		return &exitError{code: exitFatal, err: pipeline.ErrorList(late)}
	}
	switch {
	case sum.Interrupted && nothingDone:
		fmt.Fprintf(stderr, "imgpipe: interrupted before any input was done; the report at %s was left as it was\n", reportPath)
		return reported{code: exitInterrupted}
	case sum.Interrupted:
		fmt.Fprintf(stderr, "imgpipe: interrupted; the report covers the %d inputs done (--resume carries on)\n", sum.Total())
		return reported{code: exitInterrupted}
	case errors.Is(runErr, cudastage.ErrNoSuchGPU): // found while the run started on the CPU
		return noSuchGPU(runErr)
	case runErr != nil && !errors.Is(runErr, pipeline.ErrStopped):
		return fatalError("%v", runErr)
	case sum.Failed > 0:
		if errors.Is(runErr, pipeline.ErrStopped) {
			fmt.Fprintf(stderr, "imgpipe: %v (on_error: fail)\n", runErr)
		}
		return reported{code: exitSomeFailed}
	}
	return nil
}

// lockDir is the folder a run locks: its output folder, or, for a report-only run without
// one or a run whose output is a bucket, the report's folder; "" when the run writes no
// local file at all (--report -, or a bucket output with its report in the bucket).
func lockDir(outDir, report string) string {
	switch {
	case outDir != "" && !blobio.IsURL(outDir):
		return outDir
	case report != stdoutPath && !blobio.IsURL(report):
		return filepath.Dir(report)
	}
	return ""
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
