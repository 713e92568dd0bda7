package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/imgpipe/imgpipe/pipeline"
	"github.com/imgpipe/imgpipe/pipeline/job"
	"github.com/imgpipe/imgpipe/server"
)

// fakeServer speaks docs/serve.md's job routes with scripted answers: each poll of the job
// gives the next of states (the last repeats), a cancel moves it to cancelled.
type fakeServer struct {
	token     string       // wanted bearer token; "" for none
	refuse    string       // when set, POST /v1/jobs answers 400 with this reason
	states    []server.Job // the job's states, one per poll
	cancelled server.Job   // its state once cancelled
	report    string       // the JSON Lines report
	onPoll    func(int)    // called with each poll's number, before answering
	mu        sync.Mutex
	polls     int
	sent      *job.Job // the job submitted, as read back
	deleted   bool
}

func (f *fakeServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	fail := func(status int, reason string) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		json.NewEncoder(w).Encode(map[string]any{"error": reason, "status": status})
	}
	if f.token != "" && r.Header.Get("Authorization") != "Bearer "+f.token {
		fail(http.StatusUnauthorized, "no or a wrong bearer token")
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	switch r.Method + " " + r.URL.Path {
	case "POST /v1/jobs":
		var body bytes.Buffer
		body.ReadFrom(r.Body)
		j, err := job.Parse("request", body.Bytes())
		switch {
		case err != nil:
			fail(http.StatusBadRequest, err.Error())
		case f.refuse != "":
			fail(http.StatusBadRequest, f.refuse)
		default:
			f.sent = j
			w.WriteHeader(http.StatusAccepted)
			json.NewEncoder(w).Encode(server.Job{ID: "j1", State: "queued", Progress: server.Progress{Total: -1}})
		}
	case "GET /v1/jobs/j1":
		if f.onPoll != nil {
			f.onPoll(f.polls)
		}
		st := f.states[min(f.polls, len(f.states)-1)]
		if f.deleted {
			st = f.cancelled
		}
		f.polls++
		json.NewEncoder(w).Encode(st)
	case "DELETE /v1/jobs/j1":
		f.deleted = true
		w.WriteHeader(http.StatusAccepted)
	case "GET /v1/jobs/j1/report":
		w.Header().Set("Content-Type", "application/x-ndjson")
		w.Write([]byte(f.report))
	default:
		fail(http.StatusNotFound, "no route "+r.URL.Path)
	}
}

// asked returns the job sent and whether it was cancelled, for after the run.
func (f *fakeServer) asked() (*job.Job, bool, int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.sent, f.deleted, f.polls
}

// needClient skips a test while server.Client's bodies are the skeleton's stubs; the
// lead's merge of the server branch makes it run.
func needClient(t *testing.T) {
	t.Helper()
	if _, err := (&server.Client{URL: "http://127.0.0.1:1"}).Job(context.Background(), "probe"); err != nil && err.Error() == "not yet" {
		t.Skip("server.Client is still the skeleton's stub: this test runs once the server branch is merged")
	}
}

var (
	sumOK     = pipeline.Summary{OK: 2, Seconds: 0.5, MegapixelsPerSecond: 1.5, Device: "NVIDIA H100 80GB HBM3"}
	sumFailed = pipeline.Summary{OK: 1, Failed: 1, Seconds: 0.5, Device: "cpu"}
	running   = server.Job{ID: "j1", State: "running", Progress: server.Progress{Done: 1, Total: 2, OK: 1}}
)

// TestRunServer: run --server sends the job with absolute paths, shows the server's
// progress, failures and summary as a local run does, and exits with the job's code.
func TestRunServer(t *testing.T) {
	needClient(t)
	t.Setenv("IMGPIPE_TOKEN", "")
	dir := t.TempDir()
	write(t, dir, "tok", []byte("t0ken\n"))
	for _, tc := range []struct {
		name  string
		fake  *fakeServer
		flags []string
		code  int
		want  []string // parts of stderr, in order
	}{
		{"ok", &fakeServer{states: []server.Job{{ID: "j1", State: "queued", Progress: server.Progress{Total: -1}}, running,
			{ID: "j1", State: "done", Progress: server.Progress{Done: 2, Total: 2, OK: 2}, Summary: &sumOK}}},
			nil, exitOK, []string{summaryLine(sumOK) + "\n"}},
		{"progress json", &fakeServer{states: []server.Job{running, {ID: "j1", State: "done", Progress: server.Progress{Done: 2, Total: 2, OK: 2}, Summary: &sumOK}}},
			[]string{"--progress", "json"}, exitOK, []string{`{"type":"progress","done":2,"ok":2,"failed":0,"skipped":0,"total":2,`, summaryLine(sumOK)}},
		{"quiet", &fakeServer{states: []server.Job{{ID: "j1", State: "done", Progress: server.Progress{Done: 2, Total: 2, OK: 2}, Summary: &sumOK}}},
			[]string{"-q"}, exitOK, nil},
		{"some failed", &fakeServer{
			states: []server.Job{{ID: "j1", State: "done", Progress: server.Progress{Done: 2, Total: 2, OK: 1, Failed: 1}, Summary: &sumFailed, ExitCode: 1}},
			report: `{"input":"a.png","output":"a.png","status":"ok"}` + "\n" + `{"input":"bad.jpg","status":"failed","error":"decode: unexpected EOF"}` + "\n" + `{"summary":{"ok":1,"failed":1}}` + "\n"},
			nil, exitSomeFailed, []string{"imgpipe: bad.jpg: decode: unexpected EOF\n", summaryLine(sumFailed)}},
		{"job failed", &fakeServer{states: []server.Job{running, {ID: "j1", State: "failed", Error: "cuda: device fault", ExitCode: 3}}},
			nil, exitFatal, []string{"imgpipe: job j1 failed on the server: cuda: device fault"}},
		{"job refused at its start", &fakeServer{states: []server.Job{{ID: "j1", State: "failed", Error: "input.dir: no such folder", ExitCode: 2}}},
			nil, exitUsage, []string{"imgpipe: job j1 failed on the server: input.dir: no such folder"}},
		{"refused", &fakeServer{refuse: "input.dir: not under an allowed root"}, nil, exitUsage, []string{"refused the job", "not under an allowed root"}},
		{"no token", &fakeServer{token: "t0ken"}, nil, exitUsage, []string{"refused the job"}},
		{"token file", &fakeServer{token: "t0ken", states: []server.Job{{ID: "j1", State: "done", Summary: &sumOK}}},
			[]string{"--token-file", filepath.Join(dir, "tok")}, exitOK, []string{summaryLine(sumOK)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(tc.fake)
			defer srv.Close()
			args := append([]string{"run", "-i", "photos", "-o", "out", "-p", "decode | save format=png", "--workers", "3", "--server", srv.URL}, tc.flags...)
			code, stdout, stderr := cli(t, args...)
			if code != tc.code || stdout != "" {
				t.Fatalf("exit %d (want %d), stdout %q, stderr:\n%s", code, tc.code, stdout, stderr)
			}
			rest := stderr
			for _, w := range tc.want {
				i := strings.Index(rest, w)
				if i < 0 {
					t.Fatalf("stderr:\n%s\nwant, in order: %q", stderr, tc.want)
				}
				rest = rest[i+len(w):]
			}
			if tc.want == nil && stderr != "" {
				t.Errorf("stderr %q, want none", stderr)
			}
			if j, _, _ := tc.fake.asked(); tc.code != exitUsage {
				wd, _ := os.Getwd()
				if j == nil || j.InputDir != filepath.Join(wd, "photos") || j.OutputDir != filepath.Join(wd, "out") ||
					pipeline.FormatSpec(j.Steps) != "decode | save format=png" || j.Exec.Workers != 3 {
					t.Errorf("sent %+v", j)
				}
			}
		})
	}
}

// TestRunServerInterrupt: Ctrl-C during a remote run cancels the job on the server, waits
// for it to end, prints what the report holds and exits 130.
func TestRunServerInterrupt(t *testing.T) {
	needClient(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	interrupted := pipeline.Summary{OK: 1, Interrupted: true, Device: "cpu"}
	fake := &fakeServer{states: []server.Job{running}, onPoll: func(int) { cancel() },
		cancelled: server.Job{ID: "j1", State: "cancelled", Progress: server.Progress{Done: 1, Total: 2, OK: 1}, Summary: &interrupted, ExitCode: 130}}
	srv := httptest.NewServer(fake)
	defer srv.Close()
	var stdout, stderr bytes.Buffer
	code := run(ctx, []string{"run", "-i", "photos", "-o", "out", "-p", "decode | save", "--server", srv.URL}, &stdout, &stderr)
	want := []string{"imgpipe: interrupting: cancelling job j1 on the server", summaryLine(interrupted),
		"imgpipe: interrupted; the report covers the 1 inputs done (--resume carries on)"}
	for _, w := range want {
		if !strings.Contains(stderr.String(), w) {
			t.Errorf("stderr:\n%s\nwant %q", &stderr, w)
		}
	}
	if _, deleted, _ := fake.asked(); code != exitInterrupted || !deleted {
		t.Errorf("exit %d, cancelled on the server: %v", code, deleted)
	}
}

// TestRunServerUnreachable: a server that does not answer is a fatal error (exit 3).
func TestRunServerUnreachable(t *testing.T) {
	needClient(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + ln.Addr().String()
	ln.Close() // nothing listens there now
	code, _, stderr := cli(t, "run", "-i", "photos", "-o", "out", "-p", "decode | save", "--server", url)
	if code != exitFatal || !strings.Contains(stderr, "--server "+url) {
		t.Errorf("exit %d, stderr:\n%s\nwant exit 3 naming the server", code, stderr)
	}
}

// TestRunServerUsage: what cannot go to a server is a usage error (exit 2) before
// anything is sent, as are the local run's own usage errors.
func TestRunServerUsage(t *testing.T) {
	fake := &fakeServer{}
	srv := httptest.NewServer(fake)
	defer srv.Close()
	base := []string{"run", "-o", "out", "-p", "decode | save", "--server", srv.URL}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-i", "photos", "--dry-run"}, "--dry-run runs locally only"},
		{[]string{"-i", "-"}, "not '-'"},
		{[]string{"-i", "photos", "--report", "-"}, "not '-'"},
		{[]string{"-i", "photos", "--include", "*.jpg"}, "selection flags (--include, --exclude, --ext, sizes and ages) are not part of a job file"},
		{[]string{"-i", "photos", "--ext", "jpg"}, "selection flags (--include, --exclude, --ext, sizes and ages) are not part of a job file"},
		{[]string{"-i", "photos", "--max-age", "2d"}, "selection flags (--include, --exclude, --ext, sizes and ages) are not part of a job file"},
		{[]string{"-i", "photos", "--token-file", "/nonexistent/tok"}, "--token-file: open"},
		{[]string{}, "no input folder"},
		{[]string{"-i", "photos", "--workers", "-1"}, "--workers"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			code, _, stderr := cli(t, append(base, tc.args...)...)
			if code != exitUsage || !strings.Contains(stderr, tc.want) {
				t.Errorf("exit %d, stderr:\n%s\nwant exit 2 and %q", code, stderr, tc.want)
			}
		})
	}
	if sent, _, polls := fake.asked(); sent != nil || polls > 0 {
		t.Errorf("the server was asked: sent %+v, %d polls", sent, polls)
	}
}
