package queue

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/imgpipe/imgpipe/engine"
	"github.com/imgpipe/imgpipe/pipeline"
	"github.com/imgpipe/imgpipe/pipeline/folderrun"
)

// DefaultJobs is how many jobs Serve runs at once (ServeOptions.Jobs): enough that a long
// job does not hold back the short ones submitted after it.
const DefaultJobs = 4

// maxCachedJobs bounds the jobs Serve keeps loaded and compiled; past it, the least
// recently served is forgotten (and loaded again if its tasks come back).
const maxCachedJobs = 256

// ServeOptions controls Serve.
type ServeOptions struct {
	// WorkOptions are those of each job's Work (ID, Poll, Notice), except IdleExit, which
	// ends Serve once no task of any job came for that long.
	WorkOptions
	// Exec, if set, adjusts a job's execution settings for this worker (its flags, as a
	// named worker's do); an error skips the job, with a notice.
	Exec func(*pipeline.Execution) error
	// Jobs bounds the jobs run at once; 0 means DefaultJobs.
	Jobs int
}

// JobStats is what Serve did for one job.
type JobStats struct {
	// Job is the job's name.
	Job string
	// Summary is its runs' summaries added up (see addSummary).
	Summary pipeline.Summary
	WorkStats
}

// Serve runs the tasks of every submitted job on eng, which stays open across them, until
// ctx ends (the error is ctx's) or, with IdleExit, no task of any job came for that long
// (nil). A job is served as a named worker serves it: Work on the job's own consumer,
// inside eng.Run with the job's input and output opened (so its acknowledgements,
// attempts, results and report are those of Work), for as long as its tasks keep coming;
// its record and compiled chain are kept for its later tasks. Jobs with tasks left on the
// queue are found from the tasks stream's subjects, and up to Jobs run at once.
//
// A job that cannot run here (its chain does not compile to the submitted one, or Exec
// refuses its settings) is skipped with one notice and its tasks are left to other
// workers; a job whose run fails (its input folder missing) has its tasks handed back and
// is tried again after its AckWait. Neither stops Serve. The stats are those of the jobs
// it took tasks of, in name order.
func Serve(ctx context.Context, js jetstream.JetStream, eng *engine.Engine, so ServeOptions) ([]JobStats, error) {
	if so.Poll <= 0 {
		so.Poll = DefaultPoll
	}
	if so.Jobs <= 0 {
		so.Jobs = DefaultJobs
	}
	s := &server{js: js, eng: eng, so: so, jobs: map[string]*served{}, running: map[string]bool{},
		ended: make(chan ended, so.Jobs), stats: map[string]*JobStats{}}
	idleSince := time.Now()
	tick := time.NewTicker(so.Poll)
	defer tick.Stop()
	for ctx.Err() == nil {
		for _, name := range s.pending(ctx) {
			s.start(ctx, name)
		}
		if len(s.running) == 0 && so.IdleExit > 0 && time.Since(idleSince) >= so.IdleExit {
			break
		}
		select {
		case <-ctx.Done():
		case e := <-s.ended:
			if s.end(ctx, e) {
				idleSince = time.Now()
			}
		case <-tick.C:
		}
	}
	for len(s.running) > 0 {
		s.end(ctx, <-s.ended)
	}
	out := make([]JobStats, 0, len(s.stats))
	for _, name := range slices.Sorted(maps.Keys(s.stats)) {
		out = append(out, *s.stats[name])
	}
	return out, ctx.Err()
}

// server is one Serve call's state; only Serve's goroutine touches it, the runs report
// through ended.
type server struct {
	js      jetstream.JetStream
	eng     *engine.Engine
	so      ServeOptions
	tasks   jetstream.Stream   // nil until the tasks stream is found
	jobs    map[string]*served // the cache, by name
	running map[string]bool
	ended   chan ended
	stats   map[string]*JobStats // of the jobs it took tasks of
	warned  bool                 // the last look at the tasks stream failed, and said so
}

// served is a job as Serve keeps it: loaded and compiled, or why it cannot run here.
type served struct {
	job     *Job
	plan    *pipeline.Plan
	exec    pipeline.Execution
	skip    bool      // it cannot run here; the notice was given
	retryAt time.Time // not run again before
	used    time.Time // last started, for the cache's eviction
}

// ended is a job's run that returned.
type ended struct {
	c     *served
	sum   pipeline.Summary
	stats WorkStats
	err   error
}

func (s *server) notice(format string, args ...any) {
	if s.so.Notice != nil {
		s.so.Notice(fmt.Sprintf(format, args...))
	}
}

// pending names the jobs with tasks on the queue, in name order: those not yet finished,
// whether they wait for a worker or are in flight with one.
func (s *server) pending(ctx context.Context) []string {
	var info *jetstream.StreamInfo
	var err error
	if s.tasks == nil {
		s.tasks, err = s.js.Stream(ctx, TasksStream)
	}
	if err == nil {
		info, err = s.tasks.Info(ctx, jetstream.WithSubjectFilter(tasksPrefix+"*"))
	}
	switch {
	case errors.Is(err, jetstream.ErrStreamNotFound):
		s.tasks = nil // nothing submitted yet
		return nil
	case err != nil:
		if !s.warned && ctx.Err() == nil {
			s.notice("queue: %v; retrying", err)
		}
		s.warned = true
		return nil
	}
	s.warned = false
	var names []string
	for subject, n := range info.State.Subjects {
		if name := strings.TrimPrefix(subject, tasksPrefix); n > 0 && CheckName(name) == nil {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names
}

// start runs job name's tasks, unless it runs already, Jobs run, or it cannot run now.
func (s *server) start(ctx context.Context, name string) {
	if s.running[name] || len(s.running) >= s.so.Jobs {
		return
	}
	c := s.load(ctx, name)
	if c == nil || c.skip || time.Now().Before(c.retryAt) {
		return
	}
	c.used = time.Now()
	s.running[name] = true
	go func() {
		e := ended{c: c}
		e.sum, e.stats, e.err = s.run(ctx, c)
		s.ended <- e // buffered for Jobs runs: never blocks
	}()
}

// load returns job name from the cache, or loads and compiles it; nil while its submit is
// still publishing, or when it cannot be loaded now.
func (s *server) load(ctx context.Context, name string) *served {
	if c := s.jobs[name]; c != nil {
		return c
	}
	j, err := LoadJob(ctx, s.js, name)
	switch {
	case errors.Is(err, errUnpublished), ctx.Err() != nil:
		return nil // looked at again on the next poll
	case err != nil:
		// A record that cannot be read now may be readable later (a server restart).
		s.notice("%v; its tasks are left to other workers for now", err)
		c := &served{retryAt: time.Now().Add(DefaultAckWait)}
		s.remember(name, c)
		return c
	}
	c := &served{job: j}
	if err := s.compile(c); err != nil {
		s.notice("job %s: %v; its tasks are left to other workers", name, err)
		c.skip = true
	}
	s.remember(name, c)
	return c
}

// compile compiles the job's chain and applies the worker's settings to its own.
func (s *server) compile(c *served) error {
	plan, err := pipeline.CompileSpec(c.job.Pipeline)
	if err != nil {
		return fmt.Errorf("its chain: %v", err)
	}
	if err := checkPlan(c.job, plan); err != nil {
		return err
	}
	c.plan, c.exec = plan, c.job.Exec
	if s.so.Exec != nil {
		if err := s.so.Exec(&c.exec); err != nil {
			return fmt.Errorf("its settings: %v", err)
		}
	}
	return nil
}

// remember caches c, forgetting the least recently started job that is not running when
// the cache is full.
func (s *server) remember(name string, c *served) {
	if len(s.jobs) >= maxCachedJobs {
		var oldest string
		for _, n := range slices.Sorted(maps.Keys(s.jobs)) {
			if !s.running[n] && (oldest == "" || s.jobs[n].used.Before(s.jobs[oldest].used)) {
				oldest = n
			}
		}
		delete(s.jobs, oldest)
	}
	s.jobs[name] = c
}

// run is one of a job's runs: Work inside eng.Run, which opens the job's input and output
// and runs on the engine's devices. It ends once a poll brought none of the job's tasks
// (and the retries it handed back are done): Serve starts another when more come.
func (s *server) run(ctx context.Context, c *served) (sum pipeline.Summary, st WorkStats, err error) {
	wo := s.so.WorkOptions
	wo.IdleExit = wo.Poll
	sum, err = s.eng.Run(ctx, folderrun.Request{Plan: c.plan, Input: c.job.Input, Output: c.job.Output, Exec: c.exec, Notice: wo.Notice,
		Work: func(ctx context.Context, w folderrun.Work) (pipeline.Summary, error) {
			var err error
			sum, st, err = Work(ctx, s.js, c.job, w.Plan, w.Store, w.Sink, w.Options, wo)
			return sum, err
		}})
	return sum, st, err
}

// end records a job's run that returned, and reports whether it took any task.
func (s *server) end(ctx context.Context, e ended) bool {
	j := e.c.job
	delete(s.running, j.Name)
	took := e.stats.Done+e.stats.Retried+e.stats.Abandoned > 0
	switch {
	case e.err != nil && ctx.Err() == nil:
		s.notice("job %s: %v; its tasks are handed back, and tried again in %v", j.Name, e.err, j.Settings.AckWait)
		e.c.retryAt = time.Now().Add(j.Settings.AckWait)
	case !took:
		// Its tasks are in flight with other workers: look again once a dead one's could
		// have been handed back.
		e.c.retryAt = time.Now().Add(j.Settings.AckWait)
	}
	if !took {
		return false
	}
	js := s.stats[j.Name]
	if js == nil {
		js = &JobStats{Job: j.Name}
		s.stats[j.Name] = js
	}
	addSummary(&js.Summary, e.sum)
	js.Done += e.stats.Done
	js.Retried += e.stats.Retried
	js.Abandoned += e.stats.Abandoned
	return took
}

// addSummary adds the summary of a job's later run to that of its earlier ones: the runs
// came one after the other, so counts, seconds, megapixels, phase and device figures add up; the
// settings (device, workers, streams, batch) are the first run's, the same engine's.
func addSummary(dst *pipeline.Summary, s pipeline.Summary) {
	if dst.Pipeline == "" {
		*dst = s
		return
	}
	dst.OK += s.OK
	dst.Failed += s.Failed
	dst.Skipped += s.Skipped
	dst.Seconds += s.Seconds
	dst.Megapixels += s.Megapixels
	if dst.Seconds > 0 {
		dst.MegapixelsPerSecond = dst.Megapixels / dst.Seconds
	}
	dst.Batches += s.Batches
	dst.H2DSeconds += s.H2DSeconds
	dst.KernelSeconds += s.KernelSeconds
	dst.D2HSeconds += s.D2HSeconds
	dst.DeviceWallSeconds += s.DeviceWallSeconds
	if busiest := max(dst.H2DSeconds, dst.KernelSeconds, dst.D2HSeconds); busiest > 0 {
		dst.Overlap = dst.DeviceWallSeconds / busiest
	}
	dst.GPUs = nil // per-device figures of one run; the totals above cover them
	dst.Phases.Read += s.Phases.Read
	dst.Phases.Decode += s.Phases.Decode
	dst.Phases.Chain += s.Phases.Chain
	dst.Phases.Encode += s.Phases.Encode
	dst.Phases.Write += s.Phases.Write
	dst.CPUFallback += s.CPUFallback
	dst.CPUStart += s.CPUStart
	dst.SetAside += s.SetAside
	dst.GPUNotStarted = dst.GPUNotStarted || s.GPUNotStarted
	dst.Interrupted = dst.Interrupted || s.Interrupted
	dst.Stopped = dst.Stopped || s.Stopped
}
