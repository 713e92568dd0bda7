package queue

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/imgpipe/imgpipe/cudastage/sched"
	"github.com/imgpipe/imgpipe/cudastage/sched/schedtest"
	"github.com/imgpipe/imgpipe/engine"
	"github.com/imgpipe/imgpipe/pipeline"
	"github.com/imgpipe/imgpipe/pipeline/folderrun"
)

// notices collects Serve's notices from its goroutines.
type notices struct {
	mu   sync.Mutex
	msgs []string
}

func (n *notices) add(msg string) { n.mu.Lock(); n.msgs = append(n.msgs, msg); n.mu.Unlock() }

// count is how many notices contain s.
func (n *notices) count(s string) int {
	n.mu.Lock()
	defer n.mu.Unlock()
	c := 0
	for _, m := range n.msgs {
		if strings.Contains(m, s) {
			c++
		}
	}
	return c
}

// openEngine opens an Engine on a fake GPU and counts the GPU's opens and closes.
func openEngine(t *testing.T) (eng *engine.Engine, opens, closes *atomic.Int32) {
	t.Helper()
	opens, closes = new(atomic.Int32), new(atomic.Int32)
	exec := pipeline.DefaultExecution()
	exec.Device, exec.Workers = "cuda", 2
	eng, err := engine.Open(engine.Config{Exec: exec, GPUs: folderrun.GPUs{Open: func(int) (sched.Device, func() error, error) {
		opens.Add(1)
		d := schedtest.NewFake(schedtest.FakeConfig{})
		return d, func() error { closes.Add(1); d.Close(); return nil }, nil
	}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	return eng, opens, closes
}

// smallGPU gives a job's runs on the fake GPU few small slots: the tests' images are tiny.
func smallGPU(e *pipeline.Execution) error {
	e.Streams, e.Batch, e.PinnedMB = 1, 4, 8
	return nil
}

// serve runs Serve until it is idle, bounded so that a bug fails rather than hangs.
func serve(t *testing.T, js jetstream.JetStream, eng *engine.Engine, so ServeOptions) []JobStats {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	so.ID, so.Poll = "any", 100*time.Millisecond
	stats, err := Serve(ctx, js, eng, so)
	if err != nil {
		t.Fatalf("Serve: %v", err)
	}
	return stats
}

// TestServeEveryJob: one worker without a job name serves every job on one engine, whose
// GPU opens once; its outputs and reports are those of a named worker; jobs that cannot
// run here are skipped or tried again, and do not stop the others.
func TestServeEveryJob(t *testing.T) {
	srv := startServer(t)
	js := srv.connect(t)
	ctx := context.Background()
	in, in2 := t.TempDir(), t.TempDir()
	writeImages(t, in, 12)
	writeImages(t, in2, 5)
	s := fastSettings()
	submit := func(j *Job, tasks []Task) {
		t.Helper()
		if _, err := Submit(ctx, js, j, tasks); err != nil {
			t.Fatal(err)
		}
	}
	// The named worker's job, as the reference.
	named, namedTasks, plan := newJob(t, "named", in, t.TempDir(), s)
	submit(named, namedTasks)
	work(t, js, named, plan, pipeline.Options{Workers: 2})
	namedLines, _ := waitJob(t, js, named)
	namedFiles := readTree(t, named.Output)

	a, aTasks, _ := newJob(t, "a", in, t.TempDir(), s)
	b, bTasks, bPlan := newChainJob(t, "decode | grayscale | save format=png", "b", in2, t.TempDir(), s)
	broken, brokenTasks, _ := newJob(t, "broken", in2, t.TempDir(), s)
	broken.Pipeline = "decode | nope"
	other, otherTasks, _ := newJob(t, "other-version", in2, t.TempDir(), s)
	other.Pipeline = "decode|grayscale"
	refused, refusedTasks, _ := newJob(t, "refused", in2, t.TempDir(), s)
	refused.Exec.Batch = 999
	// An output folder that cannot be made: the job's runs fail before any task is taken.
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	unwritable, unwritableTasks, _ := newJob(t, "unwritable", in2, filepath.Join(file, "out"), s)
	for _, j := range []struct {
		j     *Job
		tasks []Task
	}{{a, aTasks}, {b, bTasks}, {broken, brokenTasks}, {other, otherTasks}, {refused, refusedTasks}, {unwritable, unwritableTasks}} {
		submit(j.j, j.tasks)
	}

	eng, opens, closes := openEngine(t)
	var n notices
	stats := serve(t, js, eng, ServeOptions{WorkOptions: WorkOptions{IdleExit: 3 * s.AckWait, Notice: n.add}, Exec: func(e *pipeline.Execution) error {
		if e.Batch == 999 {
			return errors.New("batch 999 refused")
		}
		return smallGPU(e)
	}})

	aLines, _ := waitJob(t, js, a)
	checkSame(t, aLines, a.Output, namedLines, namedFiles)
	bLines, _ := waitJob(t, js, b)
	wantLines, wantFiles := reference(t, bPlan, in2)
	checkSame(t, bLines, b.Output, wantLines, wantFiles)

	got := map[string]int{}
	for _, st := range stats {
		got[st.Job] = st.Done
		if st.Summary.Total() != st.Done || st.Summary.Device != "fake" {
			t.Errorf("job %s: %d done, summary %+v; want its tasks, on the engine's fake GPU", st.Job, st.Done, st.Summary)
		}
	}
	if want := map[string]int{"a": len(aTasks), "b": len(bTasks)}; !reflect.DeepEqual(got, want) {
		t.Errorf("tasks done by job %v, want %v", got, want)
	}
	for _, tc := range []struct {
		notice string
		want   int
	}{
		{"job broken: its chain:", 1}, {"job other-version: the chain compiles to", 1}, {"job refused: its settings: batch 999 refused", 1},
	} {
		if c := n.count(tc.notice); c != tc.want {
			t.Errorf("%d notices with %q, want %d: %q", c, tc.notice, tc.want, n.msgs)
		}
	}
	if n.count("job unwritable: output folder: ") == 0 || n.count("tried again in") == 0 {
		t.Errorf("no notice of the unwritable output folder: %q", n.msgs)
	}
	for _, j := range []*Job{broken, other, refused, unwritable} {
		if info := consumerInfo(t, js, j.Name); info.NumPending+uint64(info.NumAckPending) != uint64(j.Tasks) || info.NumAckPending != 0 {
			t.Errorf("job %s: %d tasks pending, %d unacknowledged; want all %d left on the queue", j.Name, info.NumPending, info.NumAckPending, j.Tasks)
		}
	}
	if err := eng.Close(); err != nil {
		t.Fatal(err)
	}
	if opens.Load() != 1 || closes.Load() != 1 {
		t.Errorf("the GPU opened %d times and closed %d times, want once each for every job", opens.Load(), closes.Load())
	}
}

// consumerInfo is the state of job name's tasks.
func consumerInfo(t *testing.T, js jetstream.JetStream, name string) *jetstream.ConsumerInfo {
	t.Helper()
	c, err := js.Consumer(context.Background(), TasksStream, name)
	if err != nil {
		t.Fatal(err)
	}
	info, err := c.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return info
}

// TestServeLaterJobs: a job submitted while the worker serves another is served too, on
// the same engine.
func TestServeLaterJobs(t *testing.T) {
	srv := startServer(t)
	js := srv.connect(t)
	in := t.TempDir()
	writeImages(t, in, 6)
	s := fastSettings()
	first, firstTasks, _ := newJob(t, "first", in, t.TempDir(), s)
	later, laterTasks, plan := newJob(t, "later", in, t.TempDir(), s)
	if _, err := Submit(context.Background(), js, first, firstTasks); err != nil {
		t.Fatal(err)
	}
	eng, opens, _ := openEngine(t)
	var once sync.Once
	var submitErr error
	stats := serve(t, js, eng, ServeOptions{WorkOptions: WorkOptions{IdleExit: 3 * s.AckWait, Notice: func(msg string) { t.Log(msg) }},
		Exec: func(e *pipeline.Execution) error {
			// Called when a job is first loaded: the first job's; the later one comes now.
			once.Do(func() { _, submitErr = Submit(context.Background(), js, later, laterTasks) })
			return smallGPU(e)
		}})
	if submitErr != nil {
		t.Fatal(submitErr)
	}
	lines, _ := waitJob(t, js, later)
	wantLines, wantFiles := reference(t, plan, in)
	checkSame(t, lines, later.Output, wantLines, wantFiles)
	names := []string{}
	for _, st := range stats {
		names = append(names, st.Job)
	}
	if !slices.Equal(names, []string{"first", "later"}) || opens.Load() != 1 {
		t.Errorf("served %v with %d GPU opens, want first and later with one", names, opens.Load())
	}
}

// TestServeEnds: Serve ends when idle (no task of any job, or none submitted at all) and
// when its context ends.
func TestServeEnds(t *testing.T) {
	srv := startServer(t)
	js := srv.connect(t)
	eng, _, _ := openEngine(t)
	for _, tc := range []struct {
		name   string
		idle   time.Duration
		cancel bool
		want   error
	}{
		{"idle, nothing submitted", 300 * time.Millisecond, false, nil},
		{"cancelled", 0, true, context.Canceled},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if tc.cancel {
				cancel()
			}
			stats, err := Serve(ctx, js, eng, ServeOptions{WorkOptions: WorkOptions{IdleExit: tc.idle, Poll: 50 * time.Millisecond}})
			if !errors.Is(err, tc.want) || len(stats) != 0 {
				t.Errorf("Serve: %v, %v; want %v and no job", stats, err, tc.want)
			}
		})
	}
}

func TestAddSummary(t *testing.T) {
	var sum pipeline.Summary
	addSummary(&sum, pipeline.Summary{OK: 2, Seconds: 1, Megapixels: 4, Device: "fake", Pipeline: "p", Batches: 1, H2DSeconds: 0.5, DeviceWallSeconds: 1,
		GPUs: []pipeline.GPUSummary{{}}})
	addSummary(&sum, pipeline.Summary{OK: 1, Failed: 1, Seconds: 1, Megapixels: 2, Device: "fake", Pipeline: "p", Batches: 2, H2DSeconds: 0.5, DeviceWallSeconds: 1, Interrupted: true})
	want := pipeline.Summary{OK: 3, Failed: 1, Seconds: 2, Megapixels: 6, MegapixelsPerSecond: 3, Device: "fake", Pipeline: "p", Batches: 3, H2DSeconds: 1,
		DeviceWallSeconds: 2, Overlap: 2, Interrupted: true}
	if !reflect.DeepEqual(sum, want) {
		t.Errorf("got %+v\nwant %+v", sum, want)
	}
}

// TestServeInterrupt: a worker serving every job that is interrupted mid-job hands its
// unfinished tasks back at once, and another finishes the job as one run would.
func TestServeInterrupt(t *testing.T) {
	srv := startServer(t)
	js := srv.connect(t)
	in := t.TempDir()
	writeImages(t, in, 40) // more than the run holds at once: the first result stops it
	s := fastSettings()
	s.AckWait = time.Minute // handed-back tasks must not wait for it
	j, tasks, plan := newJob(t, "interrupt", in, t.TempDir(), s)
	if _, err := Submit(context.Background(), js, j, tasks); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sub, err := js.Conn().Subscribe(resultsPrefix+j.Name, func(*nats.Msg) { cancel() })
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	eng, _, _ := openEngine(t)
	so := ServeOptions{WorkOptions: WorkOptions{ID: "first", Poll: 100 * time.Millisecond}, Exec: smallGPU}
	first, err := Serve(ctx, js, eng, so)
	if !errors.Is(err, context.Canceled) || len(first) != 1 || first[0].Done == 0 || first[0].Done == len(tasks) {
		t.Fatalf("interrupted Serve: %+v, %v; want some but not all of the job done, and ctx's error", first, err)
	}
	so.IdleExit = 500 * time.Millisecond
	second := serve(t, js, eng, so)
	lines, _ := waitJob(t, js, j)
	wantLines, wantFiles := reference(t, plan, in)
	checkSame(t, lines, j.Output, wantLines, wantFiles)
	if len(second) != 1 || first[0].Done+second[0].Done != len(tasks) {
		t.Errorf("%+v then %+v, want %d tasks done in all", first, second, len(tasks))
	}
}
