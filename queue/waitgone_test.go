package queue

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/imgpipe/imgpipe/pipeline"
)

type waited struct {
	lines []pipeline.ReportLine
	sum   pipeline.Summary
	err   error
}

// waitAsync runs Wait in the background, bounded so that a bug fails rather than hangs.
func waitAsync(t *testing.T, j *Job, url string) <-chan waited {
	t.Helper()
	nc, js, err := Connect(url, t.Name()+"-wait")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	done := make(chan waited, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	go func() {
		lines, sum, err := Wait(ctx, js, j, nil)
		done <- waited{lines, sum, err}
	}()
	return done
}

// Wait waits out a server restart: the job's results, stored before and after it, all
// come.
func TestWaitSurvivesRestart(t *testing.T) {
	srv := startServer(t)
	js := srv.connect(t)
	in, out := t.TempDir(), t.TempDir()
	writeImages(t, in, 4)
	j, tasks, plan := newJob(t, "waitrestart", in, out, fastSettings())
	if _, err := Submit(context.Background(), js, j, tasks); err != nil {
		t.Fatal(err)
	}
	done := waitAsync(t, j, srv.URL())
	srv.restart()
	work(t, js, j, plan, pipeline.Options{Workers: 1})
	w := <-done
	if w.err != nil || w.sum.OK != len(tasks) {
		t.Errorf("Wait across a restart: %+v, %v", w.sum, w.err)
	}
}

// Wait says that the server is gone once it has not been reachable for ServerGone,
// instead of waiting in silence.
func TestWaitSaysServerGone(t *testing.T) {
	old := ServerGone
	ServerGone = 2 * DefaultPoll
	t.Cleanup(func() { ServerGone = old })
	srv := startServer(t)
	js := srv.connect(t)
	in, out := t.TempDir(), t.TempDir()
	writeImages(t, in, 2)
	j, tasks, _ := newJob(t, "waitgone", in, out, fastSettings())
	if _, err := Submit(context.Background(), js, j, tasks); err != nil {
		t.Fatal(err)
	}
	done := waitAsync(t, j, srv.URL())
	srv.Stop()
	w := <-done
	if w.err == nil || !strings.Contains(w.err.Error(), "is gone") || !strings.Contains(w.err.Error(), "wait again") {
		t.Errorf("Wait with the server gone: %v", w.err)
	}
}
