package queue

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/imgpipe/imgpipe/blobio"
	"github.com/imgpipe/imgpipe/pipeline"
)

// Job is what submit stores under the job's name: the canonical job, so that every worker
// runs exactly the same chain on the same folders. Its JSON (stored.go) names the execution
// settings as a YAML job does.
type Job struct {
	// Name names the job on the queue (see CheckName).
	Name string `json:"name"`
	// Pipeline is the canonical spec of the chain (pipeline.Plan.String).
	Pipeline string `json:"pipeline"`
	// Input and Output are the input and output folders, as every worker must see them
	// (absolute paths on a shared file system).
	Input  string `json:"input"`
	Output string `json:"output,omitempty"`
	// Report is where wait writes the merged report unless told otherwise.
	Report string `json:"report"`
	// Exec holds the job's execution settings; a worker's flags override them.
	Exec pipeline.Execution `json:"exec"`
	// Settings are the delivery settings.
	Settings Settings `json:"settings"`
	// Tasks is the number of inputs, and so of report lines.
	Tasks int `json:"tasks"`
	// Digest identifies the job's content (everything above and every task): a second
	// submit of the same name is accepted only with the same digest.
	Digest string `json:"digest"`
	// Created is when the job was first submitted; the report's seconds count from it.
	Created time.Time `json:"created"`
	// Published is set once every task is on the queue.
	Published bool `json:"published"`
}

// Task is one input of a job, as published on the queue.
type Task struct {
	// Index is the input's position in the job, from 0: its line's place in the report.
	Index int `json:"i"`
	// Name is the input's path relative to the input folder, slash-separated.
	Name string `json:"name"`
	// OutStem is its output path without extension (pipeline.Input.OutStem).
	OutStem string `json:"out,omitempty"`
	// Size and ModTime are the file's when it was submitted: a worker that finds them
	// changed fails the task rather than process other pixels than those submitted.
	Size    int64     `json:"size"`
	ModTime time.Time `json:"mtime"`
	// Err is the folder walk's error for this input (an output name clash): the task's
	// final result is this failure.
	Err string `json:"error,omitempty"`
}

// Result is a finished task: its report line, and who made it.
type Result struct {
	Index int                 `json:"i"`
	Line  pipeline.ReportLine `json:"line"`
	// Worker and Device name the worker process and where its pixel stages ran.
	Worker string `json:"worker"`
	Device string `json:"device"`
	// Attempt is the delivery that made it (1 for the first).
	Attempt int `json:"attempt"`
	// At is when it was published.
	At time.Time `json:"at"`
}

// digest fills in j.Tasks and j.Digest from the job's content and tasks, the job as
// jobFields writes it.
func (j *Job) digest(tasks []Task) {
	h := sha256.New()
	j.Tasks = len(tasks)
	id := *j
	id.Name, id.Digest, id.Created, id.Published = "", "", time.Time{}, false
	enc := json.NewEncoder(h)
	enc.Encode(jobFields(id))
	for _, t := range tasks {
		enc.Encode(t)
	}
	j.Digest = hex.EncodeToString(h.Sum(nil))
}

// DefaultName is the name of a job submitted without one: "job-" and the start of its
// digest, so that submitting the same job twice gives the same name (and no new tasks).
func DefaultName(j Job, tasks []Task) string {
	j.digest(tasks)
	return "job-" + j.Digest[:12]
}

// ErrConflict is returned by Submit when the name is taken by a different job.
var ErrConflict = errors.New("the name is taken by a different job (other chain, folders, settings or inputs); choose another --name")

// Submit stores the job and publishes its tasks, unless a job of the same name and content
// is already on the queue: then it does nothing more than finish publishing if an earlier
// submit was interrupted, and reports fresh=false. j's Tasks, Digest and Created are set
// here. Task i must have Index i.
func Submit(ctx context.Context, js jetstream.JetStream, j *Job, tasks []Task) (fresh bool, err error) {
	if err := CheckName(j.Name); err != nil {
		return false, err
	}
	if err := j.Settings.Check(); err != nil {
		return false, err
	}
	if len(tasks) > MaxTasks {
		return false, fmt.Errorf("%d inputs, over the limit of %d per job; split the folder", len(tasks), MaxTasks)
	}
	for i, t := range tasks {
		if t.Index != i {
			return false, fmt.Errorf("task %d has index %d", i, t.Index)
		}
	}
	kv, err := setup(ctx, js)
	if err != nil {
		return false, err
	}
	j.digest(tasks)
	j.Created, j.Published = time.Now().UTC(), false
	rec, _ := json.Marshal(j)
	rev, err := kv.Create(ctx, j.Name, rec)
	fresh = err == nil
	if errors.Is(err, jetstream.ErrKeyExists) {
		e, gerr := kv.Get(ctx, j.Name)
		if gerr != nil {
			return false, fmt.Errorf("job %s: %w", j.Name, gerr)
		}
		var old Job
		if err := json.Unmarshal(e.Value(), &old); err != nil {
			return false, fmt.Errorf("job %s: stored record: %w", j.Name, err)
		}
		if old.Digest != j.Digest {
			return false, fmt.Errorf("job %s: %w", j.Name, ErrConflict)
		}
		*j = old
		if old.Published {
			return false, nil
		}
		rev, err = e.Revision(), nil
	}
	if err != nil {
		return false, fmt.Errorf("job %s: %w", j.Name, err)
	}
	if _, err := js.CreateOrUpdateConsumer(ctx, TasksStream, jetstream.ConsumerConfig{
		Durable: j.Name, Description: "imgpipe workers of job " + j.Name,
		FilterSubject: tasksPrefix + j.Name, AckPolicy: jetstream.AckExplicitPolicy,
		AckWait: j.Settings.AckWait,
		// One delivery more than the attempts: the last one only records that no worker
		// finished the task (each died or went silent on it), see source.accept.
		MaxDeliver: j.Settings.Attempts + 1, MaxAckPending: -1,
	}); err != nil {
		return fresh, fmt.Errorf("job %s: consumer: %w", j.Name, err)
	}
	if err := publishTasks(ctx, js, j.Name, tasks); err != nil {
		return fresh, err
	}
	j.Published = true
	rec, _ = json.Marshal(j)
	if _, err := kv.Update(ctx, j.Name, rec, rev); err != nil {
		return fresh, fmt.Errorf("job %s: marking it published: %w", j.Name, err)
	}
	return fresh, nil
}

// publishTasks publishes the tasks with their deduplication IDs, many at once, and waits
// until the server has stored every one.
func publishTasks(ctx context.Context, js jetstream.JetStream, name string, tasks []Task) error {
	futures := make([]jetstream.PubAckFuture, 0, min(len(tasks), 4096))
	wait := func() error {
		for _, f := range futures {
			select {
			case <-f.Ok():
			case err := <-f.Err():
				return fmt.Errorf("job %s: publishing a task: %w", name, err)
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		futures = futures[:0]
		return nil
	}
	for _, t := range tasks {
		data, err := json.Marshal(t)
		if err != nil {
			return err
		}
		f, err := js.PublishAsync(tasksPrefix+name, data, jetstream.WithMsgID(msgID(name, t.Index)))
		if err != nil {
			return fmt.Errorf("job %s: publishing a task: %w", name, err)
		}
		if futures = append(futures, f); len(futures) == cap(futures) {
			if err := wait(); err != nil {
				return err
			}
		}
	}
	return wait()
}

// errUnpublished is LoadJob's error for a job whose submit is still publishing its tasks,
// or was interrupted.
var errUnpublished = errors.New("its submit did not finish publishing the tasks; run the same submit again")

// LoadJob returns the job stored under name, or ErrNoJob.
func LoadJob(ctx context.Context, js jetstream.JetStream, name string) (*Job, error) {
	if err := CheckName(name); err != nil {
		return nil, err
	}
	kv, err := js.KeyValue(ctx, JobsBucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil, fmt.Errorf("job %s: %w", name, ErrNoJob)
	}
	if err != nil {
		return nil, fmt.Errorf("jobs bucket: %w", err)
	}
	e, err := kv.Get(ctx, name)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, fmt.Errorf("job %s: %w", name, ErrNoJob)
	}
	if err != nil {
		return nil, fmt.Errorf("job %s: %w", name, err)
	}
	var j Job
	if err := json.Unmarshal(e.Value(), &j); err != nil {
		return nil, fmt.Errorf("job %s: stored record: %w", name, err)
	}
	if j.Tasks < 0 || j.Tasks > MaxTasks {
		return nil, fmt.Errorf("job %s: stored record has %d tasks, outside 0..%d", name, j.Tasks, MaxTasks)
	}
	if !j.Published {
		return nil, fmt.Errorf("job %s: %w", name, errUnpublished)
	}
	return &j, nil
}

// ListTasks takes every input of src, a job's input folder or bucket store (its selection,
// and its shard if it names one), as the job's tasks, with each file's size and time; an
// input that cannot be read or stat'ed is a task that carries its error.
func ListTasks(ctx context.Context, src pipeline.Source, store blobio.Store) ([]Task, error) {
	var tasks []Task
	for {
		in, err := src.Next(ctx)
		if errors.Is(err, io.EOF) {
			return tasks, nil
		}
		if err != nil {
			return nil, err
		}
		if len(tasks) == MaxTasks {
			return nil, fmt.Errorf("the input holds over %d images, the limit of one job; split it (--shard)", MaxTasks)
		}
		t := Task{Index: len(tasks), Name: in.Name, OutStem: in.OutStem}
		if in.Err == nil {
			size, mtime, serr := store.Stat(ctx, in.Name)
			if serr != nil {
				in.Err = fmt.Errorf("stat: %v", serr)
			} else {
				t.Size, t.ModTime = size, mtime
			}
		}
		if in.Err != nil {
			t.Err = in.Err.Error()
		}
		tasks = append(tasks, t)
	}
}

// AwaitJob loads job name, waiting for it to be submitted (workers may start first, as in
// a Deployment) and telling notice once that it waits. With idle > 0 it gives up after
// that long, with a notice, and returns nil and no error; it returns ctx's error when ctx
// ends first.
func AwaitJob(ctx context.Context, js jetstream.JetStream, name string, idle time.Duration, notice func(string)) (*Job, error) {
	tell := func(format string, args ...any) {
		if notice != nil {
			notice(fmt.Sprintf(format, args...))
		}
	}
	start := time.Now()
	for told := false; ; told = true {
		j, err := LoadJob(ctx, js, name)
		switch {
		case err == nil:
			return j, nil
		case ctx.Err() != nil:
			return nil, ctx.Err()
		case !errors.Is(err, ErrNoJob):
			return nil, err
		case idle > 0 && time.Since(start) >= idle:
			tell("job %s was not submitted within %v; exiting", name, idle)
			return nil, nil
		case !told:
			tell("job %s is not submitted yet; waiting for it", name)
		}
		select {
		case <-ctx.Done():
		case <-time.After(DefaultPoll):
		}
	}
}
