package queue

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/imgpipe/imgpipe/pipeline"
)

// fullDisk is a sink whose every write fails as on a full disk.
type fullDisk struct{}

func (fullDisk) Write(context.Context, *pipeline.Result, *pipeline.Encoder) error {
	return fmt.Errorf("write: %w", syscall.ENOSPC)
}

func (fullDisk) Done(context.Context, *pipeline.Result) error { return nil }

// A worker whose machine cannot write its outputs (a full disk) hands its tasks back with
// the reason instead of failing them, and stops after maxMachineFaults in a row; a healthy
// worker then does every task, and the job ends with no input failed.
func TestMachineFaultHandsTasksBack(t *testing.T) {
	srv := startServer(t)
	js := srv.connect(t)
	ctx := context.Background()
	in, out := t.TempDir(), t.TempDir()
	writeImages(t, in, 6)
	s := fastSettings()
	s.Attempts = 2*maxMachineFaults + 1 // however often the faulty worker took one task
	j, tasks, plan := newJob(t, "fullDisk", in, out, s)
	if _, err := Submit(ctx, js, j, tasks); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var notices []string
	wo := WorkOptions{ID: "full", IdleExit: 2 * s.AckWait, Poll: 100 * time.Millisecond, Notice: func(m string) {
		mu.Lock()
		notices = append(notices, m)
		mu.Unlock()
	}}
	_, st, err := Work(ctx, js, j, plan, openStore(t, in), fullDisk{}, pipeline.Options{Workers: 1}, wo)
	if err == nil || !strings.Contains(err.Error(), "faults of its machine") {
		t.Errorf("the faulty worker: %v, want it to stop for its machine's faults", err)
	}
	if st.Done != 0 || st.Abandoned < maxMachineFaults {
		t.Errorf("the faulty worker: %+v, want nothing done and its tasks handed back", st)
	}
	mu.Lock()
	if !strings.Contains(strings.Join(notices, "\n"), "no space left on device") {
		t.Errorf("notices %q, want the reason", notices)
	}
	mu.Unlock()
	work(t, js, j, plan, pipeline.Options{Workers: 1})
	lines, sum := waitJob(t, js, j)
	if sum.OK != len(tasks) || sum.Failed != 0 {
		t.Errorf("summary %+v, lines %+v: want every task done by the healthy worker", sum, lines)
	}
}
