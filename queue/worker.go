package queue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/imgpipe/imgpipe/blobio"
	"github.com/imgpipe/imgpipe/pipeline"
	"github.com/imgpipe/imgpipe/pipeline/gpu"
)

// WorkOptions controls a worker.
type WorkOptions struct {
	// ID names the worker in results (host and process, say).
	ID string
	// IdleExit, when positive, ends the worker once no task came for that long. Set it
	// above the job's AckWait, so that the tasks of a worker that died are still picked up.
	IdleExit time.Duration
	// Poll is how long one pull request waits for a task; 0 means DefaultPoll.
	Poll time.Duration
	// Notice, if set, receives one-line notices (a lost connection, a result that could not
	// be stored).
	Notice func(msg string)
}

// DefaultPoll is how long a pull request waits for a task before the worker asks again;
// it bounds how late a worker notices the idle limit.
const DefaultPoll = time.Second

// WorkStats counts what a worker did, beyond the run's summary.
type WorkStats struct {
	// Done counts the tasks acknowledged with their final result.
	Done int
	// Retried counts the failed tasks handed back for another attempt.
	Retried int
	// Abandoned counts the tasks handed back unfinished (interrupted, a result that could
	// not be stored, or a fault of this machine: see handBack).
	Abandoned int
}

// Work pulls job j's tasks and runs them through plan with pipeline.Run, reading inputs
// from store (j.Input opened) and writing outputs through sink (j.Output opened). A task is acknowledged only
// after sink.Write returned (the output's atomic write is durable) and its result is
// stored on the server. A task that fails is handed back, after a pause, until its last
// attempt, whose failure is final. While a task is in flight the worker tells the server
// every AckWait/3 that it is still working on it, so a slow image is not given to another
// worker; a worker that dies stops doing so and its tasks go to others after AckWait.
//
// Work returns when ctx is cancelled (the error is ctx's; finished inputs are
// acknowledged, the others handed back unacknowledged), when IdleExit passed without a
// task (nil), or on a fatal error of the run.
func Work(ctx context.Context, js jetstream.JetStream, j *Job, plan *pipeline.Plan, store blobio.Store, sink pipeline.Sink, opt pipeline.Options, wo WorkOptions) (pipeline.Summary, WorkStats, error) {
	if wo.Poll <= 0 {
		wo.Poll = DefaultPoll
	}
	if err := checkPlan(j, plan); err != nil {
		return pipeline.Summary{}, WorkStats{}, fmt.Errorf("job %s: %w", j.Name, err)
	}
	cons, err := js.Consumer(ctx, TasksStream, j.Name)
	if err != nil {
		return pipeline.Summary{}, WorkStats{}, fmt.Errorf("job %s: tasks: %w", j.Name, err)
	}
	w := &worker{js: js, job: j, cons: cons, opt: wo, store: store, inner: sink, inflight: map[int]*entry{}}
	// The device results name: the GPU's when the run has one (a chain it cannot run
	// there runs on the CPU and says so once), else the options' or "cpu", as Run has it.
	o, _ := opt.Backend.(*gpu.Options)
	switch {
	case o != nil && o.Device != nil:
		w.device = o.Device.Name()
	case opt.Device != "":
		w.device = opt.Device
	default:
		w.device = "cpu"
	}
	keep, stopKeep := context.WithCancel(context.Background())
	var kept sync.WaitGroup
	kept.Add(1)
	go func() {
		defer kept.Done()
		w.keepAlive(keep)
	}()
	sum, err := pipeline.Run(ctx, plan, &source{w: w}, w, opt)
	stopKeep()
	kept.Wait()
	// Inputs the run dropped (interrupted before they were done) go back at once.
	w.mu.Lock()
	for idx, e := range w.inflight {
		e.msg.Nak()
		w.stats.Abandoned++
		delete(w.inflight, idx)
	}
	w.mu.Unlock()
	// Acknowledgements are sent without waiting; make sure they left before the process
	// may exit.
	if ferr := js.Conn().FlushTimeout(5 * time.Second); ferr != nil {
		w.notice("queue: flushing acknowledgements: %v", ferr)
	}
	return sum, w.stats, err
}

// checkPlan checks that plan is job j's chain as it was submitted: a worker of another
// imgpipe version may compile the same spec to another chain.
func checkPlan(j *Job, plan *pipeline.Plan) error {
	if plan.String() != j.Pipeline {
		return fmt.Errorf("the chain compiles to %q, not the submitted %q (a different imgpipe version?)", plan.String(), j.Pipeline)
	}
	return nil
}

// worker is one Work call's state: the tasks in flight, by the run's input index.
type worker struct {
	js     jetstream.JetStream
	job    *Job
	cons   jetstream.Consumer
	opt    WorkOptions
	store  blobio.Store
	inner  pipeline.Sink
	device string

	mu       sync.Mutex
	inflight map[int]*entry
	next     int // the run's index of the next input handed out
	stats    WorkStats
	retryDue time.Time // when the last task handed back for a retry is offered again
	faults   int       // tasks handed back in a row for faults of this machine (Done's own)
	warned   atomic.Bool
}

// entry is a task in flight.
type entry struct {
	msg       jetstream.Msg
	task      Task
	attempt   int
	retriable bool // false for failures that another attempt cannot change
}

func (w *worker) notice(format string, args ...any) {
	if w.opt.Notice != nil {
		w.opt.Notice(fmt.Sprintf(format, args...))
	}
}

// keepAlive tells the server every AckWait/3 that the tasks in flight are being worked on.
func (w *worker) keepAlive(ctx context.Context) {
	t := time.NewTicker(w.job.Settings.AckWait / 3)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		w.mu.Lock()
		for _, e := range w.inflight {
			e.msg.InProgress() // a lost one only risks a redelivery, which is harmless
		}
		w.mu.Unlock()
	}
}

// source hands the engine the job's tasks as inputs. pipeline.Run calls Next from one
// goroutine and numbers the inputs from 0 in the order Next returns them
// (pipeline.Result.Index), which is how results find their tasks again.
type source struct{ w *worker }

func (s *source) Next(ctx context.Context) (pipeline.Input, error) {
	w := s.w
	idleSince := time.Now()
	for {
		if err := ctx.Err(); err != nil {
			return pipeline.Input{}, err
		}
		wait := w.opt.Poll
		if w.opt.IdleExit > 0 {
			// A task this worker handed back for a retry is still to come: idle time
			// counts from when it is due.
			w.mu.Lock()
			from := idleSince
			if w.retryDue.After(from) {
				from = w.retryDue
			}
			w.mu.Unlock()
			left := w.opt.IdleExit - time.Since(from)
			if left <= 0 {
				return pipeline.Input{}, io.EOF
			}
			wait = min(wait, left)
		}
		// The pull request is not cancelled with ctx: a task the server sent meanwhile
		// would be lost to everyone for AckWait. It is handed back instead.
		t0 := time.Now()
		msg, err := w.cons.Next(jetstream.FetchMaxWait(wait))
		if ctx.Err() != nil {
			if msg != nil {
				msg.Nak()
			}
			return pipeline.Input{}, ctx.Err()
		}
		if err != nil {
			if !errors.Is(err, nats.ErrTimeout) && !errors.Is(err, context.DeadlineExceeded) && time.Since(t0) < wait {
				// The server is gone or restarting: the connection reconnects by itself;
				// ask again after a pause.
				if w.warned.CompareAndSwap(false, true) {
					w.notice("queue: %v; retrying", err)
				}
				select {
				case <-ctx.Done():
				case <-time.After(wait):
				}
			}
			continue
		}
		w.warned.Store(false)
		if in, ok := w.accept(ctx, msg); ok {
			return in, nil
		}
	}
}

// accept turns a task message into an input, or settles it at once: a message that is
// not a task is terminated, and a task past its last attempt gets its final failure.
func (w *worker) accept(ctx context.Context, msg jetstream.Msg) (pipeline.Input, bool) {
	var t Task
	meta, err := msg.Metadata()
	if err == nil {
		err = json.Unmarshal(msg.Data(), &t)
	}
	if err == nil && (t.Index < 0 || t.Index >= w.job.Tasks) {
		err = fmt.Errorf("index %d outside the job's %d tasks", t.Index, w.job.Tasks)
	}
	if err != nil {
		w.notice("queue: dropping a message that is not a task of job %s: %v", w.job.Name, err)
		msg.TermWithReason("not a task: " + err.Error())
		return pipeline.Input{}, false
	}
	e := &entry{msg: msg, task: t, attempt: int(meta.NumDelivered), retriable: true}
	if e.attempt > w.job.Settings.Attempts {
		line := pipeline.ReportLine{Input: t.Name, Status: pipeline.StatusFailed,
			Error: fmt.Sprintf("queue: no worker finished it in %d attempts (each one died, went silent for %v on it, or handed it back for a fault of its machine)", w.job.Settings.Attempts, w.job.Settings.AckWait)}
		w.finish(e, line)
		return pipeline.Input{}, false
	}
	in := pipeline.Input{Name: t.Name, OutStem: t.OutStem}
	switch {
	case t.Err != "":
		in.Err = errors.New(t.Err)
	case !filepath.IsLocal(filepath.FromSlash(t.Name)):
		in.Err = fmt.Errorf("queue: task names %q, not a relative path inside the input folder", t.Name)
	default:
		in = w.store.Input(t.Name)
		in.OutStem = t.OutStem
		in.Size, in.ModTime = t.Size, t.ModTime // recorded in the report for --resume
		in.Err = w.unchanged(ctx, t)
	}
	if in.Err != nil {
		e.retriable = false
	}
	w.mu.Lock()
	w.inflight[w.next] = e
	w.next++
	w.mu.Unlock()
	return in, true
}

// unchanged checks that the file is the one submitted. A missing or unreadable file is
// left for the decoder to report, like in a run.
func (w *worker) unchanged(ctx context.Context, t Task) error {
	size, mtime, err := w.store.Stat(ctx, t.Name)
	if err != nil {
		return nil
	}
	if size != t.Size || !mtime.Equal(t.ModTime) {
		return fmt.Errorf("queue: the file changed since it was submitted (%d bytes at %s then, %d bytes at %s now); submit it again under a new name",
			t.Size, t.ModTime.Format(time.RFC3339Nano), size, mtime.Format(time.RFC3339Nano))
	}
	return nil
}

// Write stores the output through the worker's sink.
func (w *worker) Write(ctx context.Context, r *pipeline.Result, enc *pipeline.Encoder) error {
	return w.inner.Write(ctx, r, enc)
}

// Done settles a task once its output is written: a success, or a failure on its last
// attempt, is published and acknowledged; an earlier failure is handed back for a retry.
func (w *worker) Done(ctx context.Context, r *pipeline.Result) error {
	if err := w.inner.Done(ctx, r); err != nil {
		return err
	}
	w.mu.Lock()
	e := w.inflight[r.Index]
	delete(w.inflight, r.Index)
	w.mu.Unlock()
	if e == nil {
		return fmt.Errorf("queue: a result for input %d (%s) that no task gave", r.Index, r.Input)
	}
	if r.Status == pipeline.StatusFailed && blobio.MachineFault(r.Err) {
		return w.handBack(e, r)
	}
	if r.Status == pipeline.StatusOK {
		w.faults = 0
	}
	if r.Status == pipeline.StatusFailed && e.retriable && e.attempt < w.job.Settings.Attempts {
		delay := time.Duration(e.attempt) * w.job.Settings.RetryDelay
		e.msg.NakWithDelay(delay)
		w.mu.Lock()
		w.stats.Retried++
		if due := time.Now().Add(delay); due.After(w.retryDue) {
			w.retryDue = due
		}
		w.mu.Unlock()
		return nil
	}
	line := r.Line()
	if line.Status != pipeline.StatusFailed {
		line.Pipeline = w.job.Pipeline // as a run's report records it, for --resume
	}
	w.finish(e, line)
	return nil
}

// maxMachineFaults is how many tasks in a row a worker hands back for faults of its own
// machine before it stops: one such fault may be a single unreadable file, several in a row
// say that this machine cannot do the job (a full or read-only disk, a store it may not
// reach), and its tasks are better left to other workers.
const maxMachineFaults = 3

// handBack gives a task that failed for a fault of this machine (blobio.MachineFault: it
// could not read the input or write the output) back to the queue at once, unfailed, so
// that another worker does it; after maxMachineFaults in a row the worker stops with the
// reason, handing back what it holds.
func (w *worker) handBack(e *entry, r *pipeline.Result) error {
	e.msg.Nak()
	w.mu.Lock()
	w.stats.Abandoned++
	w.mu.Unlock()
	w.faults++
	n := w.faults
	w.notice("queue: %s: handed back to the queue, for a fault of this machine, not of the input: %v", r.Input, r.Err)
	if n >= maxMachineFaults {
		return fmt.Errorf("queue: this worker handed back %d tasks in a row for faults of its machine (the last: %v); it stops, and other workers do them", n, r.Err)
	}
	return nil
}

// finish publishes a task's final report line, then acknowledges the task. If the line
// cannot be stored within AckWait the task is handed back instead: another attempt will
// publish it. Neither is fatal to the worker.
func (w *worker) finish(e *entry, line pipeline.ReportLine) {
	res := Result{Index: e.task.Index, Line: line, Worker: w.opt.ID, Device: w.device, Attempt: e.attempt, At: time.Now().UTC()}
	data, _ := json.Marshal(res)
	deadline := time.Now().Add(w.job.Settings.AckWait)
	for {
		// The run's context may be cancelled already (SIGINT): finished work is still
		// recorded, under a deadline of its own.
		ctx, cancel := context.WithTimeout(context.Background(), min(5*time.Second, w.job.Settings.AckWait))
		_, err := w.js.Publish(ctx, resultsPrefix+w.job.Name, data, jetstream.WithMsgID(msgID(w.job.Name, e.task.Index)))
		if err == nil {
			// The acknowledgement is not waited for: were it lost, the task would be done
			// again and its second result dropped by Wait, while waiting would cost a
			// round trip per image.
			err = e.msg.Ack()
			cancel()
			w.mu.Lock()
			if err == nil {
				w.stats.Done++
			} else {
				// The result is stored; the redelivered task will be done and dropped by
				// Wait as a duplicate.
				w.stats.Abandoned++
			}
			w.mu.Unlock()
			return
		}
		cancel()
		if time.Now().After(deadline) {
			w.notice("queue: could not store the result of %s (%v); handing the task back", e.task.Name, err)
			e.msg.Nak()
			w.mu.Lock()
			w.stats.Abandoned++
			w.mu.Unlock()
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}
