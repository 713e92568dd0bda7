package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/imgpipe/imgpipe/pipeline/folderrun"
	"github.com/imgpipe/imgpipe/pipeline/job"
	"github.com/imgpipe/imgpipe/server"
)

// remotePoll is how often run --server asks for its job's progress: often enough for a
// bar that moves smoothly, rarely enough to cost the server nothing.
const remotePoll = 200 * time.Millisecond

// runRemote submits the job to the server f.server names and follows it there, showing
// the progress, failures, summary and exit code a local run would.
func runRemote(ctx context.Context, j *job.Job, f *runFlags, stderr io.Writer) error {
	if err := remoteJob(j, f); err != nil {
		return err
	}
	tok, err := token(f.tokenFile)
	if err != nil {
		return err
	}
	c := &server.Client{URL: strings.TrimSuffix(f.server, "/"), Token: tok}
	sub, err := c.Submit(ctx, j.Marshal())
	if ctx.Err() != nil && err != nil {
		return reported{code: exitInterrupted} // Ctrl-C before the server answered
	} else if se := (*server.StatusError)(nil); errors.As(err, new(*url.Error)) || errors.As(err, &se) && (se.Status == http.StatusTooManyRequests || se.Status >= 500) {
		return fatalError("--server %s: %v", f.server, err) // the server's state, not the job's mistake
	} else if err != nil {
		return usageError("--server %s refused the job: %v", f.server, err)
	}
	var ui *progress
	show := func(rj server.Job) {
		if ui == nil && (rj.Progress.Total >= 0 || rj.Finished()) {
			ui = newProgress(stderr, f.quiet, f.progress, func() int { return rj.Progress.Total })
		}
		if ui != nil {
			ui.counts(rj.Progress.OK, rj.Progress.Failed, rj.Progress.Skipped)
		}
	}
	last, err := c.Wait(ctx, sub.ID, remotePoll, show)
	if ctx.Err() != nil {
		fmt.Fprintf(stderr, "imgpipe: interrupting: cancelling job %s on the server (Ctrl-C again to abort)\n", sub.ID)
		ctx = context.WithoutCancel(ctx)
		if err = c.Cancel(ctx, sub.ID); err == nil {
			last, err = c.Wait(ctx, sub.ID, remotePoll, show)
		}
	}
	if err != nil {
		return fatalError("--server %s: job %s: %v", f.server, sub.ID, err)
	}
	if ui != nil {
		ui.finish()
	}
	return remoteOutcome(ctx, c, last, ui, f.quiet, stderr)
}

// remoteJob checks that the job can run on a server and makes its paths absolute, since
// the server's working directory is not this one's.
func remoteJob(j *job.Job, f *runFlags) error {
	switch {
	case f.dryRun:
		return usageError("--dry-run runs locally only, not with --server")
	case j.InputDir == "-" || j.Report == "-" || j.Exec.Trace == "-" || j.Report == folderrun.NoReport:
		return usageError("with --server, -i, --report and --trace name paths on the server, not '-' (nor --report %s)", folderrun.NoReport)
	case f.name != "":
		return usageError("--name is not part of a job file, so not sent with --server")
	case f.inputs.Any():
		return usageError("the selection flags (--include, --exclude, --ext, sizes and ages) are not part of a job file, so not sent with --server")
	}
	if err := j.Abs(); err != nil {
		return usageError("%v", err)
	}
	return nil
}

// remoteOutcome prints what a finished remote job did, as runRun does a local run's, and
// returns the job's exit code.
func remoteOutcome(ctx context.Context, c *server.Client, rj server.Job, ui *progress, quiet bool, stderr io.Writer) error {
	if rj.State == "failed" || rj.Summary == nil {
		return &exitError{code: cmp.Or(rj.ExitCode, exitFatal), err: fmt.Errorf("job %s %s on the server: %s", rj.ID, rj.State, rj.Error)}
	}
	if ui != nil && rj.Summary.Failed > 0 {
		failed, err := c.Failures(ctx, rj.ID, maxListedFailures)
		if err != nil {
			fmt.Fprintf(stderr, "imgpipe: the job's report: %v\n", err)
		}
		for _, l := range failed {
			ui.failures = append(ui.failures, failure{l.Input, l.Error})
		}
		ui.printFailures()
	}
	if !quiet {
		printSummary(stderr, "", *rj.Summary)
	}
	// runOutcome says what an interrupted run's report holds; the exit code is the server's.
	_ = runOutcome(*rj.Summary, nil, "", stderr)
	if rj.ExitCode == exitOK {
		return nil
	}
	return reported{code: rj.ExitCode}
}
