package folderrun

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/imgpipe/imgpipe/blobio"
	"github.com/imgpipe/imgpipe/cudastage/sched"
	"github.com/imgpipe/imgpipe/pipeline"
	"github.com/imgpipe/imgpipe/pipeline/gpu"
)

// Prepared is a checked request with its inputs open: ready to run, or to show what it
// would do. Close releases it.
type Prepared struct {
	req       Request
	in        *inputs
	gpuInputs int // the inputs countForGPU counted; 0 when it did not
}

// Prepare checks r and opens its inputs; it opens no device and writes nothing. A mistake
// is a *RequestError, an input that cannot be opened a *RunError. A nil Stdin or Stdout
// is the process's.
func Prepare(ctx context.Context, r Request) (*Prepared, error) {
	if r.Plan == nil {
		return nil, badf("no chain to run")
	}
	if r.Stdin == nil {
		r.Stdin = os.Stdin
	}
	if r.Stdout == nil {
		r.Stdout = os.Stdout
	}
	if err := namedOutput(&r); err != nil {
		return nil, err
	}
	if r.Work == nil { // the queue's submit checked the paths the workers share
		if err := r.Selection.Check(); err != nil {
			return nil, &RequestError{Err: err}
		}
		if err := CheckPaths(r); err != nil {
			return nil, err
		}
	}
	sel := r.Selection
	if len(sel.Exts) == 0 {
		sel.Exts = r.Plan.InputExts() // load takes .npy files
	}
	in, err := openInputs(ctx, &r, sel)
	if err != nil {
		return nil, err
	}
	return &Prepared{req: r, in: in}, nil
}

// Run prepares r, runs it and closes it (see Prepare and Prepared.Run).
func Run(ctx context.Context, r Request) (pipeline.Summary, error) {
	p, err := Prepare(ctx, r)
	if err != nil {
		return pipeline.Summary{}, err
	}
	defer p.Close()
	return p.Run(ctx)
}

// Close releases the inputs (a bucket).
func (p *Prepared) Close() { p.in.close() }

// Source returns a fresh source of the inputs, from the start, without resume.
func (p *Prepared) Source() pipeline.Source { return p.in.source() }

// Store is the input folder or bucket, opened; nil for a single file or a list of paths.
func (p *Prepared) Store() blobio.Store { return p.in.store }

// ReportPath is where the run's report goes (see Request.ReportPath).
func (p *Prepared) ReportPath() string { return p.req.ReportPath() }

// Count is the number of inputs, for a progress display: the count the device choice
// made, or a cheap walk; -1 when the walk fails.
func (p *Prepared) Count() int {
	if p.gpuInputs > 0 {
		return p.gpuInputs
	}
	return p.in.count()
}

// DryRun returns the inputs the run would take, with resume applied (Input.Previous marks
// what it would skip), and the function that closes the previous reports. It takes no
// lock, keeps no journal and opens no device: the reports are read as they lie, the journal
// of a killed run first, as the run would read them.
func (p *Prepared) DryRun(ctx context.Context) (pipeline.Source, func(), error) {
	rp := p.req.ReportPath()
	return p.resume(ctx, p.in.source(), []string{JournalPath(rp), rp})
}

// Run runs the chain: it opens the devices (before anything is created, so that a missing
// GPU leaves no output folder behind), locks the output folder, removes the temporary files
// a killed run left there, keeps the report as a journal that becomes the report when the
// run ends, applies resume, and writes the trace. It returns the summary and nil when every
// input was covered (some may have failed: sum.Failed); the error of pipeline.Run as it is
// when the run was interrupted (sum.Interrupted) or stopped at a failure
// (pipeline.ErrStopped); otherwise a *RequestError or a *RunError. What can still fail once
// the run is done (the report's rename, the trace) is a *RunError that comes with the
// summary of what the run did.
func (p *Prepared) Run(ctx context.Context) (pipeline.Summary, error) {
	devs, err := p.devices()
	if err != nil {
		return pipeline.Summary{}, err
	}
	var runErr error
	defer func() {
		// After a device fault the GPU refuses further calls; the run's error says why.
		if err := devs.Close(); err != nil && runErr == nil {
			p.req.notice("closing the GPU: %v", err)
		}
	}()
	opt := gpu.RunOptions(p.req.Exec, devs.GPUs...)
	if err := p.gpuOptions(ctx, &opt, devs); err != nil {
		return pipeline.Summary{}, err
	}
	opt.Device, opt.Progress, opt.Notice = "cpu", p.req.Progress, p.req.Notice
	if p.req.Work != nil {
		return p.work(ctx, opt, &runErr)
	}
	s, err := p.open(ctx, &opt)
	if err != nil {
		return pipeline.Summary{}, err
	}
	defer s.close()
	src := s.src
	if p.req.Starting != nil {
		src = p.req.Starting(src)
	}
	var tr *sched.Trace
	if p.req.Exec.Trace != "" {
		// Spans are kept in memory (bounded; a cut trace says so) and written at the end.
		tr = sched.NewTrace("imgpipe", 0)
		opt.Trace = tr
	}
	if p.req.Options != nil {
		p.req.Options(&opt)
	}
	sum, bucketErr := p.execute(ctx, s, src, opt, &runErr)
	return sum, p.finish(s, tr, sum, runErr, bucketErr)
}

// work hands the chain, its opened input and output and its options to Request.Work.
func (p *Prepared) work(ctx context.Context, opt pipeline.Options, runErr *error) (pipeline.Summary, error) {
	if p.req.Plan.Save != nil {
		if err := p.makeOutput(); err != nil {
			return pipeline.Summary{}, err
		}
	}
	sink, closeOut, err := p.output(ctx)
	if err != nil {
		return pipeline.Summary{}, err
	}
	defer closeOut()
	var sum pipeline.Summary
	sum, *runErr = p.req.Work(ctx, Work{Plan: p.req.Plan, Store: p.in.store, Sink: sink, Options: opt})
	if *runErr != nil {
		return sum, &RunError{Err: *runErr}
	}
	return sum, nil
}

// makeOutput makes a local output folder.
func (p *Prepared) makeOutput() error {
	if out := p.req.Output; out != "" && !blobio.IsURL(out) {
		if err := os.MkdirAll(out, 0o755); err != nil {
			return failf("output folder: %v", err)
		}
	}
	return nil
}

// output opens the run's sink: the output folder or bucket, or, for a report-only chain
// (decode | histogram), one that keeps nothing.
func (p *Prepared) output(ctx context.Context) (pipeline.Sink, func() error, error) {
	if p.req.Plan.Save == nil {
		return pipeline.Discard(), func() error { return nil }, nil
	}
	out, closeOut, err := blobio.Output(ctx, p.req.Output)
	if err != nil {
		return nil, nil, failf("output: %v", err)
	}
	return out, closeOut, nil
}

// session is what a run into a folder holds while it goes: its lock, journal, source and
// sink, released by close in the reverse order.
type session struct {
	report   string
	toBucket bool
	jr       *journal // nil for a report on Stdout or in the bucket
	src      pipeline.Source
	sink     pipeline.Sink
	undo     []func()
}

func (s *session) close() {
	for i := len(s.undo) - 1; i >= 0; i-- {
		s.undo[i]()
	}
}

// open makes the output folder, locks it, removes what a killed run left, starts the
// journal, applies resume and opens the sink; opt gets the report's writer.
func (p *Prepared) open(ctx context.Context, opt *pipeline.Options) (_ *session, err error) {
	r := &p.req
	if err := p.makeOutput(); err != nil {
		return nil, err
	}
	s := &session{report: r.ReportPath(), toBucket: r.bucketReport()}
	defer func() {
		if err != nil {
			if s.jr != nil {
				s.jr.discard()
			}
			s.close()
		}
	}()
	// Everything below writes into the output folder (or the report's folder): under its
	// lock, so that a second run cannot take this one's temporary files or report.
	if dir := lockDir(localOutput(r.Output), s.report); dir != "" {
		lock, err := LockFolder(dir)
		if err != nil {
			return nil, failf("%v", err)
		}
		s.undo = append(s.undo, lock.Unlock)
	}
	local := s.report != StdoutPath && s.report != NoReport && !s.toBucket
	if local {
		p.removeTemps(s.report)
	} else if localOutput(r.Output) != "" {
		p.removeTemps("") // a file:// bucket's folder
	}
	if out := localOutput(r.Output); r.Plan.Save != nil && out != "" {
		if err := checkWritable(out); err != nil {
			return nil, failf("output folder %s: cannot write there (%v); nothing was processed", out, err)
		}
	}
	s.undo = append(s.undo, pipeline.SetGoMemoryLimit(opt.MemoryBudget))
	opt.Report = r.Stdout
	if s.report == NoReport {
		opt.Report = io.Discard
	}
	var prev []string // resume needs a report file or object (CheckPaths): the journal's for a file
	if local {
		if err := os.MkdirAll(filepath.Dir(s.report), 0o755); err != nil {
			return nil, failf("report %s: %v", s.report, err)
		}
		if s.jr, err = openJournal(s.report); err != nil {
			return nil, failf("report %s: %v", s.report, err)
		}
		opt.Report = s.jr.writer()
		prev = []string{s.jr.prev, s.jr.report}
	}
	src, closePrev, err := p.resume(ctx, p.in.source(), prev)
	if err != nil {
		return nil, err
	}
	s.undo = append(s.undo, closePrev)
	sink, closeOut, err := p.output(ctx)
	if err != nil {
		return nil, err
	}
	s.undo = append(s.undo, func() { closeOut() })
	s.src, s.sink = src, sink
	return s, nil
}

// lockDir is the folder a run locks: its output folder (a file:// bucket's included), or,
// for a report-only run without one or a run whose output is another bucket, the report's
// folder; "" when the run writes no local file at all (a report on Stdout, or a bucket
// output with its report in the bucket).
func lockDir(outDir, report string) string {
	switch {
	case outDir != "" && !blobio.IsURL(outDir):
		return outDir
	case report != StdoutPath && report != NoReport && !blobio.IsURL(report):
		return filepath.Dir(report)
	}
	return ""
}

// removeTemps removes the temporary files a killed run left under the output folder (a
// file:// bucket's included) and beside the report ("" for none), saying what it did.
func (p *Prepared) removeTemps(report string) {
	outDir, files := localOutput(p.req.Output), []string{report}
	if p.req.named { // one named file: its temporaries, not a walk of the folder that holds it (often the working one)
		files = append(files, filepath.Join(outDir, strings.Replace(p.req.Name, pipeline.NameExt, p.req.Plan.Save.Ext, 1)))
		outDir = ""
	}
	if n, err := removeTemps(outDir, files...); err != nil {
		p.req.notice("removing temporary files a previous run left: %v", err)
	} else if n > 0 {
		p.req.info("removed %d temporary files a previous run left (it was killed mid-write)", n)
	}
}

// errNothingDone aborts the report object's write when the run did nothing.
var errNothingDone = errors.New("nothing done")

// execute runs the chain, into the journal or, for a report in the output bucket, into
// that object, which is written only when the run did something: an empty report must not
// replace the previous one.
func (p *Prepared) execute(ctx context.Context, s *session, src pipeline.Source, opt pipeline.Options, runErr *error) (pipeline.Summary, error) {
	var sum pipeline.Summary
	if !s.toBucket {
		sum, *runErr = pipeline.Run(ctx, p.req.Plan, src, s.sink, opt)
		return sum, nil
	}
	err := blobio.WriteObject(ctx, p.req.Output, ReportName, func(w io.Writer) error {
		opt.Report = w
		sum, *runErr = pipeline.Run(ctx, p.req.Plan, src, s.sink, opt)
		if *runErr != nil && sum.Total() == 0 {
			return errNothingDone
		}
		return nil
	})
	if errors.Is(err, errNothingDone) {
		err = nil
	}
	return sum, err
}

// finish makes the journal the report (or drops it when the run did nothing: an empty
// report must not replace the previous one), writes the trace, and turns the run's outcome
// into Run's error.
func (p *Prepared) finish(s *session, tr *sched.Trace, sum pipeline.Summary, runErr, bucketErr error) error {
	nothingDone := runErr != nil && sum.Total() == 0
	var late []error
	if bucketErr != nil {
		late = append(late, fmt.Errorf("report %s: %v", s.report, bucketErr))
	}
	switch {
	case s.jr == nil:
	case nothingDone:
		s.jr.discard()
	default:
		if err := s.jr.commit(); err != nil {
			late = append(late, fmt.Errorf("report %s: %v (the report so far is in %s)", s.report, err, s.jr.path))
		}
	}
	if tr != nil {
		if err := writeTrace(tr, p.req.Exec.Trace, p.req.Stdout); err != nil {
			late = append(late, fmt.Errorf("--trace %s: %v", p.req.Exec.Trace, err))
		}
	}
	if len(late) > 0 {
		if runErr != nil && !errors.Is(runErr, pipeline.ErrStopped) && !sum.Interrupted {
			late = append([]error{runErr}, late...)
		}
		return &RunError{Err: pipeline.ErrorList(late)}
	}
	switch {
	case runErr == nil, sum.Interrupted, errors.Is(runErr, pipeline.ErrStopped):
		return runErr
	case runDeviceError(runErr) != nil: // found while the run started on the CPU
		return runDeviceError(runErr)
	}
	return failf("%v", runErr)
}

// writeTrace writes the timeline to path, atomically (an interrupted run still leaves a
// whole trace), or to stdout for StdoutPath. A trace that cannot be written fails the run:
// asked for, it must not silently be missing.
func writeTrace(tr *sched.Trace, path string, stdout io.Writer) error {
	if path == StdoutPath {
		return tr.WriteJSON(stdout)
	}
	return WriteFile(path, tr.WriteJSON)
}
