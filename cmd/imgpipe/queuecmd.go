package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"

	"github.com/imgpipe/imgpipe/blobio"
	"github.com/imgpipe/imgpipe/cmd/imgpipe/internal/printer"
	"github.com/imgpipe/imgpipe/engine"
	"github.com/imgpipe/imgpipe/pipeline"
	"github.com/imgpipe/imgpipe/pipeline/folderrun"
	"github.com/imgpipe/imgpipe/queue"
	"github.com/imgpipe/imgpipe/stages"
)

// queueFlags are the flags the queue commands share.
type queueFlags struct {
	url  string
	name string
}

func (q *queueFlags) register(cmd *cobra.Command, nameHelp string) {
	cmd.Flags().StringVar(&q.url, "queue", "", "the NATS server with JetStream, nats://HOST:PORT (required)")
	cmd.Flags().StringVar(&q.name, "name", "", nameHelp)
}

// connect checks the flags and connects; a bad flag is a usage error, an unreachable
// server a fatal one.
func (q *queueFlags) connect(client string, needName bool) (*nats.Conn, jetstream.JetStream, error) {
	if q.url == "" {
		return nil, nil, usageError("--queue is required (nats://HOST:PORT)")
	}
	if needName && q.name == "" {
		return nil, nil, usageError("--name is required: the name submit printed")
	}
	if q.name != "" {
		if err := queue.CheckName(q.name); err != nil {
			return nil, nil, usageError("--name: %v", err)
		}
	}
	nc, js, err := queue.Connect(q.url, client)
	if err != nil {
		return nil, nil, fatalError("%v", err)
	}
	return nc, js, nil
}

func clientID() string {
	host, _ := os.Hostname()
	return fmt.Sprintf("%s-%d", host, os.Getpid())
}

func newSubmitCmd(stdout, stderr io.Writer) *cobra.Command {
	var f runFlags
	var q queueFlags
	s := queue.DefaultSettings()
	cmd := withHelp("submit", &cobra.Command{
		Use:   "submit [JOB.yaml] --queue nats://HOST:PORT [--name NAME] [flags]",
		Short: "Put a job's inputs on a NATS JetStream work queue for 'imgpipe worker'",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runSubmit(cmd, args, &f, &q, s, stdout, stderr)
		},
	})
	q.register(cmd, "the job's name on the queue (default: job- and a digest of the job, so the same job gets the same name)")
	jobFlags(cmd, &f)
	settingFlags(cmd, false)
	fl := cmd.Flags()
	fl.DurationVar(&s.AckWait, "ack-wait", s.AckWait, "how long a task may go without news from its worker before another worker gets it")
	fl.IntVar(&s.Attempts, "attempts", s.Attempts, fmt.Sprintf("how many times a failing task is tried before its failure is final (1..%d)", queue.MaxAttempts))
	fl.DurationVar(&s.RetryDelay, "retry-delay", s.RetryDelay, "pause before a failed task is tried again, times the attempt number")
	return cmd
}

func runSubmit(cmd *cobra.Command, args []string, f *runFlags, q *queueFlags, s queue.Settings, stdout, stderr io.Writer) error {
	if err := s.Check(); err != nil {
		return usageError("%v", err)
	}
	j, req, err := loadConfig(cmd, args, f, stderr)
	if err != nil {
		return err
	}
	p, err := folderrun.Prepare(cmd.Context(), req)
	if err != nil {
		return err
	}
	defer p.Close()
	if j.Report == folderrun.NoReport {
		return usageError("--report %s: wait writes the job's report; name a file or leave the default", folderrun.NoReport)
	}
	if p.Store() == nil {
		return usageError("submit takes an input folder or bucket, not %s (workers find the inputs by their path inside it)", describeInput(j.InputDir))
	}
	rec := queue.Job{Pipeline: req.Plan.String(), Exec: j.Exec, Settings: s}
	// Workers elsewhere must find the same places: folders become absolute paths, bucket
	// URLs stay as they are, and a bucket output's report goes into the bucket.
	report := p.ReportPath()
	if j.Report == "" && blobio.IsURL(j.OutputDir) {
		report = ""
	}
	for _, p := range []struct{ from, to *string }{{&j.InputDir, &rec.Input}, {&j.OutputDir, &rec.Output}, {&report, &rec.Report}} {
		*p.to = *p.from
		if *p.from != "" && !blobio.IsURL(*p.from) {
			if *p.to, err = filepath.Abs(*p.from); err != nil {
				return usageError("%v", err)
			}
		}
	}
	tasks, err := queue.ListTasks(cmd.Context(), p.Source(), p.Store())
	if err != nil {
		return fatalError("%v", err)
	}
	rec.Name = q.name
	if rec.Name == "" {
		rec.Name = queue.DefaultName(rec, tasks)
	}
	nc, js, err := q.connect(clientID(), false)
	if err != nil {
		return err
	}
	defer nc.Close()
	fresh, err := queue.Submit(cmd.Context(), js, &rec, tasks)
	switch {
	case errors.Is(err, queue.ErrConflict):
		return usageError("%v", err)
	case err != nil:
		return fatalError("%v", err)
	}
	if !f.quiet {
		if fresh {
			fmt.Fprintf(stderr, "imgpipe: submitted %d inputs as job %s\n", rec.Tasks, rec.Name)
		} else {
			fmt.Fprintf(stderr, "imgpipe: job %s was already submitted (%d inputs); nothing added\n", rec.Name, rec.Tasks)
		}
	}
	fmt.Fprintln(stdout, rec.Name)
	return nil
}

// describeInput names an input that is not a folder, for messages.
func describeInput(in string) string {
	if in == folderrun.StdinInput {
		return "a list on stdin (-i -)"
	}
	return "the single file " + in
}

// workerSettings are the execution settings a worker may set for itself; the rest are the
// job's.
var workerSettings = []string{"device", "gpu", "streams", "batch", "pinned_mb", "max_memory_mb", "workers"}

func newWorkerCmd(stderr io.Writer) *cobra.Command {
	var q queueFlags
	var idle time.Duration
	var quiet bool
	cmd := withHelp("worker", &cobra.Command{
		Use:   "worker --queue nats://HOST:PORT [--name NAME] [flags]",
		Short: "Process submitted jobs' tasks from a NATS JetStream work queue",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runWorker(cmd, &q, idle, quiet, stderr)
		},
	})
	q.register(cmd, "the job's name, as submit printed it (default: every submitted job, on one engine opened once)")
	cmd.Flags().DurationVar(&idle, "exit-when-idle", 0, "exit once no task came for this long (0: never); set it above the job's --ack-wait")
	cmd.Flags().BoolVarP(&quiet, "quiet", "q", false, "no summary line")
	settingFlags(cmd, false, workerSettings...)
	return cmd
}

func runWorker(cmd *cobra.Command, q *queueFlags, idle time.Duration, quiet bool, stderr io.Writer) error {
	ctx := cmd.Context()
	if idle < 0 {
		return usageError("--exit-when-idle %v: want 0 or more", idle)
	}
	id := clientID()
	nc, js, err := q.connect(id, false)
	if err != nil {
		return err
	}
	defer nc.Close()
	notice := printer.Of(stderr).Warning
	if q.name == "" {
		return serveWorker(cmd, js, queue.WorkOptions{ID: id, IdleExit: idle, Notice: notice}, quiet, stderr)
	}
	j, err := queue.AwaitJob(ctx, js, q.name, idle, notice)
	switch {
	case err != nil && ctx.Err() != nil:
		return reported{code: exitInterrupted}
	case err != nil:
		return fatalError("%v", err)
	case j == nil:
		return nil // idle before the job came
	}
	plan, err := pipeline.CompileSpec(j.Pipeline)
	if err != nil {
		return fatalError("job %s: its chain: %v", j.Name, err)
	}
	exec := j.Exec
	if errs := setFlags(cmd, &exec); len(errs) > 0 {
		return &exitError{code: exitUsage, err: pipeline.ErrorList(errs)}
	}
	var st *queue.WorkStats // set once the worker started
	sum, err := folderrun.Run(ctx, folderrun.Request{Plan: plan, Input: j.Input, Output: j.Output, Exec: exec, GPUs: gpus(true, ""), Notice: notice,
		Work: func(ctx context.Context, w folderrun.Work) (pipeline.Summary, error) {
			sum, stats, err := queue.Work(ctx, js, j, w.Plan, w.Store, w.Sink, w.Options, queue.WorkOptions{ID: id, IdleExit: idle, Notice: notice})
			st = &stats
			return sum, err
		}})
	if st == nil {
		return err
	}
	if !quiet {
		printSummary(stderr, fmt.Sprintf("imgpipe: worker %s: %d tasks done, %d retried, %d handed back; ", id, st.Done, st.Retried, st.Abandoned), sum)
	}
	if ctx.Err() != nil {
		return reported{code: exitInterrupted}
	}
	return err
}

// serveWorker serves every submitted job on one engine, its devices opened once with the
// worker's settings (queue.Serve); each job's settings are its own with the worker's flags.
func serveWorker(cmd *cobra.Command, js jetstream.JetStream, wo queue.WorkOptions, quiet bool, stderr io.Writer) error {
	exec := pipeline.DefaultExecution()
	if errs := setFlags(cmd, &exec); len(errs) > 0 {
		return &exitError{code: exitUsage, err: pipeline.ErrorList(errs)}
	}
	eng, err := engine.Open(engine.Config{Exec: exec, GPUs: gpus(true, ""), Notice: wo.Notice})
	if err != nil {
		return err
	}
	defer eng.Close()
	jobs, err := queue.Serve(cmd.Context(), js, eng, queue.ServeOptions{WorkOptions: wo, Exec: func(e *pipeline.Execution) error {
		if errs := setFlags(cmd, e); len(errs) > 0 {
			return pipeline.ErrorList(errs)
		}
		return nil
	}})
	for _, j := range jobs {
		if !quiet {
			printSummary(stderr, fmt.Sprintf("imgpipe: worker %s: job %s: %d tasks done, %d retried, %d handed back; ", wo.ID, j.Job, j.Done, j.Retried, j.Abandoned), j.Summary)
		}
	}
	if err != nil {
		return reported{code: exitInterrupted}
	}
	return nil
}

func newWaitCmd(stderr io.Writer) *cobra.Command {
	var q queueFlags
	var report string
	var quiet bool
	cmd := withHelp("wait", &cobra.Command{
		Use:   "wait --queue nats://HOST:PORT --name NAME [--report FILE]",
		Short: "Wait until a submitted job is done and write its report",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runWait(cmd.Context(), &q, report, quiet, stderr)
		},
	})
	q.register(cmd, "the job's name, as submit printed it (required)")
	cmd.Flags().StringVar(&report, "report", "", "where to write the merged report (default: the job's report path)")
	cmd.Flags().BoolVarP(&quiet, "quiet", "q", false, "no summary line")
	return cmd
}

func runWait(ctx context.Context, q *queueFlags, report string, quiet bool, stderr io.Writer) error {
	nc, js, err := q.connect(clientID(), true)
	if err != nil {
		return err
	}
	defer nc.Close()
	j, err := queue.LoadJob(ctx, js, q.name)
	if err != nil {
		return fatalError("%v", err)
	}
	lines, sum, err := queue.Wait(ctx, js, j, nil)
	switch {
	case ctx.Err() != nil:
		fmt.Fprintf(stderr, "imgpipe: interrupted; no report written (the job goes on)\n")
		return reported{code: exitInterrupted}
	case err != nil:
		return fatalError("%v", err)
	}
	if report == "" {
		report = j.Report
	}
	// Every task is final, so no worker of the job writes any more (a straggler still
	// redoing a task would only fail a duplicate that the report ignores): the temporary
	// files of workers killed mid-write can go.
	if j.Output != "" && !blobio.IsURL(j.Output) {
		if _, err := stages.RemoveTemps(j.Output); err != nil {
			fmt.Fprintf(stderr, "imgpipe: removing temporary files killed workers left: %v\n", err)
		}
	}
	write := func(w io.Writer) error { return pipeline.WriteReport(w, lines, sum) }
	if report == "" { // a bucket output's report goes into the bucket
		report = strings.TrimSuffix(j.Output, "/") + "/" + folderrun.ReportName
		err = blobio.WriteObject(ctx, j.Output, folderrun.ReportName, write)
	} else {
		err = folderrun.WriteFile(report, write)
	}
	if err != nil {
		return fatalError("report %s: %v", report, err)
	}
	if !quiet {
		printSummary(stderr, "", sum)
	}
	if sum.Failed > 0 {
		return reported{code: exitSomeFailed}
	}
	return nil
}
