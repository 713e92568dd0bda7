package queue

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/imgpipe/imgpipe/pipeline"
)

// work runs one in-process worker until it is idle for longer than the job's AckWait.
func work(t *testing.T, js jetstream.JetStream, j *Job, plan *pipeline.Plan, opt pipeline.Options) WorkStats {
	t.Helper()
	opt.Workers = max(opt.Workers, 1)
	_, st, err := Work(context.Background(), js, j, plan, openStore(t, j.Input), openSink(t, j.Output), opt,
		WorkOptions{ID: t.Name(), IdleExit: 2 * j.Settings.AckWait, Poll: 100 * time.Millisecond})
	if err != nil {
		t.Error(err)
	}
	return st
}

// waitJob waits for the job's report, with a bound so a bug fails rather than hangs.
func waitJob(t *testing.T, js jetstream.JetStream, j *Job) ([]pipeline.ReportLine, pipeline.Summary) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	lines, sum, err := Wait(ctx, js, j, nil)
	if err != nil {
		t.Fatal(err)
	}
	return lines, sum
}

// checkSame checks that the queue's report lines and outputs are those of one run.
func checkSame(t *testing.T, lines []pipeline.ReportLine, out string, wantLines []pipeline.ReportLine, wantFiles map[string][]byte) {
	t.Helper()
	if !reflect.DeepEqual(lines, wantLines) {
		t.Errorf("report lines differ from one run's:\n got %+v\nwant %+v", lines, wantLines)
	}
	got := readTree(t, out)
	if len(got) != len(wantFiles) {
		t.Errorf("%d outputs, want %d", len(got), len(wantFiles))
	}
	for name, b := range wantFiles {
		if !bytes.Equal(got[name], b) {
			t.Errorf("output %s differs from one run's", name)
		}
	}
}

func TestWorkersMatchOneRun(t *testing.T) {
	srv := startServer(t)
	for _, tc := range []struct {
		name    string
		workers int
		buckets bool // input and output as file:// bucket URLs
	}{{"one", 1, false}, {"three", 3, false}, {"buckets", 2, true}} {
		t.Run(tc.name, func(t *testing.T) {
			js := srv.connect(t)
			in, out := t.TempDir(), t.TempDir()
			writeImages(t, in, 24)
			inLoc, outLoc := in, out
			if tc.buckets {
				inLoc, outLoc = "file://"+filepath.ToSlash(in), "file://"+filepath.ToSlash(out)+"?metadata=skip&no_tmp_dir=1"
			}
			j, tasks, plan := newJob(t, "match-"+tc.name, inLoc, outLoc, fastSettings())
			if _, err := Submit(context.Background(), js, j, tasks); err != nil {
				t.Fatal(err)
			}
			var wg sync.WaitGroup
			stats := make([]WorkStats, tc.workers)
			for i := range tc.workers {
				wg.Go(func() { stats[i] = work(t, srv.connect(t), j, plan, pipeline.Options{Workers: 2}) })
			}
			lines, sum := waitJob(t, js, j)
			wg.Wait()
			wantLines, wantFiles := reference(t, plan, in)
			checkSame(t, lines, out, wantLines, wantFiles)
			done := 0
			for _, s := range stats {
				done += s.Done
			}
			if done != len(tasks) || sum.OK != len(tasks) || sum.Workers < 1 || sum.Workers > tc.workers || sum.Pipeline != j.Pipeline {
				t.Errorf("done %d, summary %+v; want %d tasks done by at most %d workers", done, sum, len(tasks), tc.workers)
			}
		})
	}
}

func TestSubmitIdempotent(t *testing.T) {
	srv := startServer(t)
	js := srv.connect(t)
	ctx := context.Background()
	in := t.TempDir()
	writeImages(t, in, 5)
	j, tasks, _ := newJob(t, "idem", in, t.TempDir(), fastSettings())
	again := *j
	for i, want := range []bool{true, false} {
		jj := *j
		fresh, err := Submit(ctx, js, &jj, tasks)
		if err != nil || fresh != want {
			t.Fatalf("submit %d: fresh %v, %v; want %v", i, fresh, err, want)
		}
	}
	st, err := js.Stream(ctx, TasksStream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != uint64(len(tasks)) {
		t.Errorf("%d tasks on the stream after two submits, want %d", info.State.Msgs, len(tasks))
	}
	if a, b := DefaultName(again, tasks), DefaultName(again, tasks); a != b || !strings.HasPrefix(a, "job-") {
		t.Errorf("default names %q, %q: want one stable job- name", a, b)
	}
	for _, tc := range []struct {
		name   string
		change func(*Job, []Task) []Task
		want   error
	}{
		{"other chain", func(j *Job, ts []Task) []Task { j.Pipeline = "decode | save format=png"; return ts }, ErrConflict},
		{"other inputs", func(j *Job, ts []Task) []Task { return ts[:2] }, ErrConflict},
		{"bad name", func(j *Job, ts []Task) []Task { j.Name = "a.b"; return ts }, nil},
		{"bad settings", func(j *Job, ts []Task) []Task { j.Settings.Attempts = 0; return ts }, nil},
		{"bad index", func(j *Job, ts []Task) []Task {
			ts = append([]Task(nil), ts...)
			ts[1].Index = 7
			return ts
		}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			jj := again
			ts := tc.change(&jj, tasks)
			_, err := Submit(ctx, js, &jj, ts)
			if err == nil || tc.want != nil && !errors.Is(err, tc.want) {
				t.Errorf("got %v, want an error (%v)", err, tc.want)
			}
		})
	}
	if _, err := LoadJob(ctx, js, "never-submitted"); !errors.Is(err, ErrNoJob) {
		t.Errorf("LoadJob of an unknown name: %v, want ErrNoJob", err)
	}
}

// TestRedelivered takes a task as a worker that dies would (never acknowledged), and
// publishes a duplicate result: the report still has every input exactly once.
func TestRedelivered(t *testing.T) {
	srv := startServer(t)
	js := srv.connect(t)
	ctx := context.Background()
	in, out := t.TempDir(), t.TempDir()
	writeImages(t, in, 6)
	j, tasks, plan := newJob(t, "redeliver", in, out, fastSettings())
	if _, err := Submit(ctx, js, j, tasks); err != nil {
		t.Fatal(err)
	}
	cons, err := js.Consumer(ctx, TasksStream, j.Name)
	if err != nil {
		t.Fatal(err)
	}
	dead, err := cons.Next(jetstream.FetchMaxWait(5 * time.Second))
	if err != nil {
		t.Fatal(err)
	}
	var taken Task
	if err := json.Unmarshal(dead.Data(), &taken); err != nil {
		t.Fatal(err)
	}
	dup, _ := json.Marshal(Result{Index: 1, Line: pipeline.ReportLine{Input: "duplicate", Status: pipeline.StatusFailed}, Worker: "other"})
	work(t, js, j, plan, pipeline.Options{})
	// A second result for a task, stored after the first: Wait keeps the first.
	if _, err := js.Publish(ctx, resultsPrefix+j.Name, dup); err != nil {
		t.Fatal(err)
	}
	lines, sum := waitJob(t, js, j)
	wantLines, wantFiles := reference(t, plan, in)
	checkSame(t, lines, out, wantLines, wantFiles)
	if sum.OK != len(tasks) {
		t.Errorf("summary %+v, want %d ok", sum, len(tasks))
	}
	if taken.Index != 0 {
		t.Errorf("the first task taken has index %d, want 0", taken.Index)
	}
}

// TestFailures covers tasks that fail: a corrupt file (retried, then its own error), a
// name outside the folder and a file changed since submit (final at once).
func TestFailures(t *testing.T) {
	srv := startServer(t)
	js := srv.connect(t)
	ctx := context.Background()
	in, out := t.TempDir(), t.TempDir()
	writeImages(t, in, 3)
	if err := os.WriteFile(filepath.Join(in, "bad.png"), []byte("\x89PNG\r\n\x1a\nnot a png"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := fastSettings()
	s.Attempts = 3
	j, tasks, plan := newJob(t, "failures", in, out, s)
	// Walk order: bad.png, img000.png, img001.png, img002.png.
	tasks[2].Size++                                                       // img001.png "changed"
	tasks = append(tasks, Task{Index: len(tasks), Name: "../escape.png"}) // a hostile task
	if _, err := Submit(ctx, js, j, tasks); err != nil {
		t.Fatal(err)
	}
	st := work(t, js, j, plan, pipeline.Options{Workers: 1})
	lines, sum := waitJob(t, js, j)
	want := []struct {
		input, status, err string
	}{
		{"bad.png", "failed", "decode: "},
		{"img000.png", "ok", ""},
		{"img001.png", "failed", "changed since it was submitted"},
		{"img002.png", "ok", ""},
		{"../escape.png", "failed", "not a relative path"},
	}
	if len(lines) != len(want) {
		t.Fatalf("%d lines, want %d: %+v", len(lines), len(want), lines)
	}
	for i, w := range want {
		l := lines[i]
		if l.Input != w.input || string(l.Status) != w.status || !strings.Contains(l.Error, w.err) {
			t.Errorf("line %d: %+v, want %s %s with %q", i, l, w.input, w.status, w.err)
		}
	}
	if sum.Failed != 3 || sum.OK != 2 {
		t.Errorf("summary %+v, want 3 failed, 2 ok", sum)
	}
	// bad.png was tried Attempts times: Attempts-1 retries.
	if st.Retried != s.Attempts-1 {
		t.Errorf("%d retries, want %d (only the corrupt file is retried)", st.Retried, s.Attempts-1)
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(in), "escape.png")); err == nil {
		t.Error("a task wrote outside the output folder")
	}
}

// TestServerRestart restarts the server while a worker is mid-job: the worker reconnects
// and the job completes with every input once.
func TestServerRestart(t *testing.T) {
	srv := startServer(t)
	js := srv.connect(t)
	ctx := context.Background()
	in, out := t.TempDir(), t.TempDir()
	writeImages(t, in, 12)
	j, tasks, plan := newJob(t, "restart", in, out, fastSettings())
	if _, err := Submit(ctx, js, j, tasks); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	restarted := false
	opt := pipeline.Options{Workers: 1, Progress: func(*pipeline.Result) {
		// After the first result: the run's next results are stored through the new server.
		once.Do(func() { srv.restart(); restarted = true })
	}}
	work(t, js, j, plan, opt)
	lines, _ := waitJob(t, js, j)
	wantLines, wantFiles := reference(t, plan, in)
	checkSame(t, lines, out, wantLines, wantFiles)
	if !restarted {
		t.Error("the server was not restarted")
	}
}

// TestInterrupt cancels a worker mid-job: what it finished is acknowledged, the rest goes
// back to the queue at once, and another worker finishes the job.
func TestInterrupt(t *testing.T) {
	srv := startServer(t)
	js := srv.connect(t)
	in, out := t.TempDir(), t.TempDir()
	writeImages(t, in, 10)
	s := fastSettings()
	s.AckWait = time.Minute // handed-back tasks must not wait for it
	j, tasks, plan := newJob(t, "interrupt", in, out, s)
	if _, err := Submit(context.Background(), js, j, tasks); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	n := 0
	opt := pipeline.Options{Workers: 2, Progress: func(*pipeline.Result) {
		if n++; n == 3 {
			cancel()
		}
	}}
	_, st, err := Work(ctx, js, j, plan, openStore(t, in), pipeline.ToFolder(out), opt, WorkOptions{ID: "first", Poll: 100 * time.Millisecond})
	if !errors.Is(err, context.Canceled) || st.Done < 3 || st.Done == len(tasks) {
		t.Fatalf("interrupted worker: %+v, %v; want some but not all done, and ctx's error", st, err)
	}
	_, st2, err := Work(context.Background(), js, j, plan, openStore(t, in), pipeline.ToFolder(out), pipeline.Options{Workers: 2},
		WorkOptions{ID: "second", IdleExit: 300 * time.Millisecond, Poll: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	lines, _ := waitJob(t, js, j)
	wantLines, wantFiles := reference(t, plan, in)
	checkSame(t, lines, out, wantLines, wantFiles)
	if st.Done+st2.Done != len(tasks) {
		t.Errorf("%d + %d tasks done, want %d", st.Done, st2.Done, len(tasks))
	}
}

func TestSettingsCheck(t *testing.T) {
	for _, tc := range []struct {
		s  Settings
		ok bool
	}{
		{DefaultSettings(), true},
		{Settings{AckWait: time.Millisecond, Attempts: 1}, false},
		{Settings{AckWait: time.Second, Attempts: 0}, false},
		{Settings{AckWait: time.Second, Attempts: MaxAttempts + 1}, false},
		{Settings{AckWait: time.Second, Attempts: 1, RetryDelay: -1}, false},
	} {
		if err := tc.s.Check(); (err == nil) != tc.ok {
			t.Errorf("%+v: %v, want ok=%v", tc.s, err, tc.ok)
		}
	}
	for _, n := range []string{"", "a b", "a.b", "a>", strings.Repeat("x", 65)} {
		if CheckName(n) == nil {
			t.Errorf("CheckName(%q) accepted it", n)
		}
	}
}

// TestNoWorkerFinishes takes a task as a worker that dies on it would, on every attempt:
// its last delivery records that as the task's failure, so Wait still ends.
func TestNoWorkerFinishes(t *testing.T) {
	srv := startServer(t)
	js := srv.connect(t)
	ctx := context.Background()
	in, out := t.TempDir(), t.TempDir()
	writeImages(t, in, 1)
	j, tasks, plan := newJob(t, "poison", in, out, fastSettings())
	if _, err := Submit(ctx, js, j, tasks); err != nil {
		t.Fatal(err)
	}
	cons, err := js.Consumer(ctx, TasksStream, j.Name)
	if err != nil {
		t.Fatal(err)
	}
	for range j.Settings.Attempts {
		if _, err := cons.Next(jetstream.FetchMaxWait(5 * time.Second)); err != nil {
			t.Fatal(err) // taken, never acknowledged: redelivered after AckWait
		}
	}
	st := work(t, js, j, plan, pipeline.Options{})
	lines, sum := waitJob(t, js, j)
	if len(lines) != 1 || lines[0].Status != pipeline.StatusFailed || !strings.Contains(lines[0].Error, "no worker finished it in 2 attempts") {
		t.Errorf("lines %+v, want one failure saying no worker finished it", lines)
	}
	if sum.Failed != 1 || st.Done != 1 {
		t.Errorf("summary %+v, stats %+v", sum, st)
	}
}

// TestWaitAcrossRestart restarts the server while Wait is mid-job, after it has read the
// results of a first worker and before the rest exist: Wait reconnects, reads the results
// a second worker stores through the new server, and reports every input once.
func TestWaitAcrossRestart(t *testing.T) {
	srv := startServer(t)
	js := srv.connect(t)
	in, out := t.TempDir(), t.TempDir()
	writeImages(t, in, 10)
	j, tasks, plan := newJob(t, "wait-restart", in, out, fastSettings())
	if _, err := Submit(context.Background(), js, j, tasks); err != nil {
		t.Fatal(err)
	}
	type waited struct {
		lines []pipeline.ReportLine
		err   error
	}
	seen, result := make(chan int, len(tasks)), make(chan waited, 1)
	waitJS := srv.connect(t)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		lines, _, err := Wait(ctx, waitJS, j, func(done, _ int) { seen <- done })
		result <- waited{lines, err}
	}()

	// The first worker stops after three results; the rest go back to the queue.
	ctx, cancel := context.WithCancel(context.Background())
	n := 0
	opt := pipeline.Options{Workers: 1, Progress: func(*pipeline.Result) {
		if n++; n == 3 {
			cancel()
		}
	}}
	_, st, err := Work(ctx, js, j, plan, openStore(t, in), pipeline.ToFolder(out), opt, WorkOptions{ID: "first", Poll: 100 * time.Millisecond})
	if !errors.Is(err, context.Canceled) || st.Done == 0 || st.Done == len(tasks) {
		t.Fatalf("first worker: %+v, %v; want some but not all done", st, err)
	}
	for done := 0; done < st.Done; {
		select {
		case done = <-seen:
		case w := <-result:
			t.Fatalf("Wait ended before the restart: %d lines, %v", len(w.lines), w.err)
		case <-time.After(30 * time.Second):
			t.Fatalf("Wait saw %d of the first worker's %d results", done, st.Done)
		}
	}
	srv.restart()
	work(t, js, j, plan, pipeline.Options{Workers: 2})
	w := <-result
	if w.err != nil {
		t.Fatalf("Wait across the restart: %v", w.err)
	}
	wantLines, wantFiles := reference(t, plan, in)
	checkSame(t, w.lines, out, wantLines, wantFiles)
}
