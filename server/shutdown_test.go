package server

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/imgpipe/imgpipe/pipeline/folderrun"
)

// TestShutdownWaits: Shutdown refuses new work at once (503, readiness too) and returns
// only once the request in progress has been answered and the job in progress is done.
func TestShutdownWaits(t *testing.T) {
	root := t.TempDir()
	in, out := filepath.Join(root, "in"), filepath.Join(root, "out")
	writeImages(t, in, 4)
	s := newServer(t, Config{AllowRoots: []string{root}})
	if w := call(s, http.MethodPost, "/v1/jobs", jobFile(in, out)); w.Code != http.StatusAccepted {
		t.Fatalf("job: %d %s", w.Code, w.Body)
	}
	img := pngImage(t)
	pr, pw := io.Pipe()
	answered := make(chan *httptest.ResponseRecorder)
	go func() {
		w := httptest.NewRecorder()
		s.ServeHTTP(w, httptest.NewRequest(http.MethodPost, processURL(thumb), pr))
		answered <- w
	}()
	if _, err := pw.Write(img[:10]); err != nil { // returns once the handler reads: it was admitted
		t.Fatal(err)
	}
	stopped := make(chan error)
	go func() { stopped <- s.Shutdown(context.Background()) }()
	for s.ready() {
		runtime.Gosched()
	}
	for _, tc := range []struct{ method, target string }{{"POST", processURL(thumb)}, {"POST", "/v1/jobs"}, {"GET", "/readyz"}} {
		if w := call(s, tc.method, tc.target, img); w.Code != http.StatusServiceUnavailable {
			t.Fatalf("%s while draining: %d %s", tc.target, w.Code, w.Body)
		} else {
			errorOf(t, w)
		}
	}
	if w := call(s, http.MethodGet, "/healthz", nil); w.Code != 200 {
		t.Fatalf("healthz while draining: %d", w.Code)
	}
	select {
	case err := <-stopped:
		t.Fatalf("Shutdown returned %v with a request in progress", err)
	default:
	}
	pw.Write(img[10:])
	pw.Close()
	if w := <-answered; w.Code != 200 {
		t.Fatalf("the request in progress: %d %s", w.Code, w.Body)
	}
	if err := <-stopped; err != nil {
		t.Fatal(err)
	}
	if jobs := s.jobs.list(); len(jobs) != 1 || jobs[0].State != StateDone || jobs[0].Progress.OK != 4 {
		t.Fatalf("the job in progress at Shutdown: %+v", jobs)
	}
}

// TestShutdownCancels: when Shutdown's context ends first, the jobs are cancelled and
// waited for, their reports covering what they did.
func TestShutdownCancels(t *testing.T) {
	root := t.TempDir()
	in, out := filepath.Join(root, "in"), filepath.Join(root, "out")
	writeImages(t, in, 8)
	s := newServer(t, Config{AllowRoots: []string{root}})
	if w := call(s, http.MethodPost, "/v1/jobs", jobFile(in, out)); w.Code != http.StatusAccepted {
		t.Fatalf("job: %d %s", w.Code, w.Body)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.Shutdown(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Shutdown: %v", err)
	}
	j := s.jobs.list()[0]
	switch j.State {
	case StateCancelled:
		if j.ExitCode != folderrun.ExitInterrupted {
			t.Fatalf("cancelled job %+v", j)
		}
	case StateDone: // it was done before the cancel reached it
	default:
		t.Fatalf("job after Shutdown: %+v", j)
	}
	if j.Progress.Done > 0 { // a run interrupted before its first input leaves no report
		report := readAll(t, filepath.Join(out, folderrun.ReportName))
		if lines := bytes.Count(report, []byte("\n")); lines != j.Progress.Done+1 { // and the summary
			t.Errorf("report of %d lines for %d inputs done", lines, j.Progress.Done)
		}
	}
}

// TestShutdownUnderLoad: requests admitted before Shutdown are all answered with their
// outputs, those after it refused; Shutdown returns once the last is answered.
func TestShutdownUnderLoad(t *testing.T) {
	s := newServer(t, Config{})
	img := pngImage(t)
	want := folderOutput(t, thumb, img)
	const n = 16
	answers := make(chan *httptest.ResponseRecorder, n)
	bodies := make([]*io.PipeWriter, n)
	for i := range n {
		pr, pw := io.Pipe()
		bodies[i] = pw
		go func() {
			w := httptest.NewRecorder()
			s.ServeHTTP(w, httptest.NewRequest(http.MethodPost, processURL(thumb), pr))
			answers <- w
		}()
		if _, err := pw.Write(img[:1]); err != nil { // admitted
			t.Fatal(err)
		}
	}
	stopped := make(chan error)
	go func() { stopped <- s.Shutdown(context.Background()) }()
	for s.ready() {
		runtime.Gosched()
	}
	for _, pw := range bodies {
		pw.Write(img[1:])
		pw.Close()
	}
	for range n {
		if w := <-answers; w.Code != 200 || !bytes.Equal(w.Body.Bytes(), want) {
			t.Fatalf("a request admitted before Shutdown: %d %s", w.Code, w.Body)
		}
	}
	if err := <-stopped; err != nil {
		t.Fatal(err)
	}
	if w := call(s, http.MethodPost, processURL(thumb), img); w.Code != http.StatusServiceUnavailable {
		t.Fatalf("after Shutdown: %d", w.Code)
	}
}
