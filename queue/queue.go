// Package queue spreads one imgpipe job over many machines through a NATS JetStream work
// queue: Submit stores the canonical job and publishes one task per input (its relative
// path, size and modification time, never its pixels); Work pulls tasks and runs them
// through the same engine as `imgpipe run` (pipeline.Run, with the queue as the source),
// acknowledging a task only once its output is written and its report line is stored; Wait
// gathers the report lines into one report in input order. Serve is a worker of every job:
// it runs each job with tasks on the queue through Work, on one engine.Engine opened once.
//
// Delivery is at least once: a task whose worker dies is delivered again after AckWait. The
// outputs are still written exactly once in effect, because each write is atomic and
// idempotent (the same input always gives the same bytes at the same path), and the report
// has one line per input because Wait keeps the first final line of each task and drops
// the others.
//
// Layout on the server (one of each for all jobs):
//   - KV bucket JobsBucket: key NAME holds the Job record;
//   - work-queue stream TasksStream, subject imgpipe.tasks.NAME, one durable consumer NAME
//     per job (the workers of a job share it);
//   - stream ResultsStream, subject imgpipe.results.NAME: one Result per finished task.
package queue

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Names of the server-side objects that hold the jobs, their tasks and their results.
const (
	JobsBucket    = "imgpipe_jobs"
	TasksStream   = "IMGPIPE_TASKS"
	ResultsStream = "IMGPIPE_RESULTS"

	tasksPrefix   = "imgpipe.tasks."
	resultsPrefix = "imgpipe.results."
)

// Defaults of a job's delivery settings (Settings), chosen for images that take well under
// a second each: AckWait is how long a silent worker keeps a task before it goes to
// another one (workers renew it every AckWait/3 while a task is in flight, so a slow
// image does not need a longer one; only a dead worker costs AckWait). Attempts is how
// many times a failing task is tried. RetryDelay times the attempt number is the pause
// before a failed task is offered again.
const (
	DefaultAckWait    = 30 * time.Second
	DefaultAttempts   = 3
	DefaultRetryDelay = 2 * time.Second
)

// MaxTasks bounds the inputs of one job: Wait keeps a report line per input in memory
// (a few kilobytes with a histogram), and submit keeps the task list.
const MaxTasks = 10_000_000

// MaxAttempts bounds Settings.Attempts.
const MaxAttempts = 100

// dedupWindow is how long the server remembers message IDs: a submit or a result published
// twice within it is stored once. Longer gaps are harmless (see Wait and Submit).
const dedupWindow = 10 * time.Minute

var namePattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// CheckName reports whether name can name a job: 1 to 64 letters, digits, '-' or '_' (it
// becomes a subject token, a consumer name and a KV key).
func CheckName(name string) error {
	if !namePattern.MatchString(name) {
		return fmt.Errorf("job name %q: want 1 to 64 letters, digits, '-' or '_'", name)
	}
	return nil
}

// ErrNoJob is returned when no job of the given name was submitted.
var ErrNoJob = errors.New("no such job on the queue (was it submitted?)")

// Settings are a job's delivery settings; submit fixes them for all its workers.
type Settings struct {
	// AckWait is how long a task may go without news from its worker before it is
	// delivered to another one.
	AckWait time.Duration `json:"ack_wait"`
	// Attempts is how many times a task is processed before its failure is final.
	Attempts int `json:"attempts"`
	// RetryDelay times the attempt number is the pause before a failed task is retried.
	RetryDelay time.Duration `json:"retry_delay"`
}

// DefaultSettings returns the default delivery settings.
func DefaultSettings() Settings {
	return Settings{AckWait: DefaultAckWait, Attempts: DefaultAttempts, RetryDelay: DefaultRetryDelay}
}

// Check refuses settings the server or the retry logic cannot work with.
func (s Settings) Check() error {
	switch {
	case s.AckWait < 100*time.Millisecond:
		return fmt.Errorf("ack wait %v: want at least 100ms", s.AckWait)
	case s.Attempts < 1 || s.Attempts > MaxAttempts:
		return fmt.Errorf("attempts %d: want 1..%d", s.Attempts, MaxAttempts)
	case s.RetryDelay < 0:
		return fmt.Errorf("retry delay %v: want 0 or more", s.RetryDelay)
	}
	return nil
}

// Connect connects to the NATS server at url (nats://HOST:PORT) for a long-lived client:
// it reconnects for ever after a connection loss or a server restart, and buffers what is
// published meanwhile. client names the connection on the server's monitoring pages.
func Connect(url, client string) (*nats.Conn, jetstream.JetStream, error) {
	nc, err := nats.Connect(url,
		nats.Name(client),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(250*time.Millisecond),
		nats.RetryOnFailedConnect(false),
	)
	if err != nil {
		return nil, nil, fmt.Errorf("queue %s: %w", url, err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, nil, fmt.Errorf("queue %s: %w", url, err)
	}
	return nc, js, nil
}

// setup creates the bucket and the streams when they are missing (and brings their
// settings up to date otherwise); every client calls it, so none depends on another
// having run first.
func setup(ctx context.Context, js jetstream.JetStream) (jetstream.KeyValue, error) {
	kv, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket: JobsBucket, Description: "imgpipe jobs", Storage: jetstream.FileStorage, History: 1,
	})
	if err != nil {
		return nil, fmt.Errorf("jobs bucket: %w", err)
	}
	if _, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name: TasksStream, Description: "imgpipe tasks, one per input",
		Subjects: []string{tasksPrefix + "*"}, Retention: jetstream.WorkQueuePolicy,
		Storage: jetstream.FileStorage, Duplicates: dedupWindow,
	}); err != nil {
		return nil, fmt.Errorf("tasks stream: %w", err)
	}
	if _, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name: ResultsStream, Description: "imgpipe report lines, one per finished task",
		Subjects: []string{resultsPrefix + "*"}, Retention: jetstream.LimitsPolicy,
		Storage: jetstream.FileStorage, Duplicates: dedupWindow,
	}); err != nil {
		return nil, fmt.Errorf("results stream: %w", err)
	}
	return kv, nil
}

// msgID is the deduplication ID of a job's task or result number index.
func msgID(name string, index int) string { return fmt.Sprintf("%s.%d", name, index) }
