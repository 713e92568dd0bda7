package server

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// needClient skips a test of the Client while its bodies are the skeleton's stubs.
func needClient(t *testing.T, c *Client) {
	t.Helper()
	if _, err := c.Job(context.Background(), "probe"); err != nil && err.Error() == "not yet" {
		t.Skip("server.Client is still the skeleton's stub")
	}
}

// TestWait: Wait calls seen with every state until the job ends, and returns the last;
// a poll that fails ends it with the error and the last state seen.
func TestWait(t *testing.T) {
	states := []Job{
		{ID: "j1", State: "queued", Progress: Progress{Total: -1}},
		{ID: "j1", State: "running", Progress: Progress{Done: 1, Total: 2, OK: 1}},
		{ID: "j1", State: "done", Progress: Progress{Done: 2, Total: 2, OK: 1, Failed: 1}, ExitCode: 1},
	}
	var polls atomic.Int32
	fake := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := strings.TrimPrefix(r.URL.Path, "/v1/jobs/")
		if id != "j1" && id != "gone" {
			w.WriteHeader(http.StatusNotFound)
			json.NewEncoder(w).Encode(map[string]any{"error": "no job " + id, "status": 404})
			return
		}
		n := int(polls.Add(1)) - 1
		if id == "gone" && n > 0 {
			w.WriteHeader(http.StatusNotFound)
			json.NewEncoder(w).Encode(map[string]any{"error": "no job gone", "status": 404})
			return
		}
		json.NewEncoder(w).Encode(states[min(n, len(states)-1)])
	}))
	defer fake.Close()
	c := &Client{URL: fake.URL}
	needClient(t, c)
	polls.Store(0)
	var seen []string
	j, err := c.Wait(context.Background(), "j1", time.Millisecond, func(j Job) { seen = append(seen, j.State) })
	if err != nil || j.State != "done" || j.ExitCode != 1 || strings.Join(seen, ",") != "queued,running,done" {
		t.Fatalf("Wait = %+v, %v; seen %v", j, err, seen)
	}
	polls.Store(0)
	j, err = c.Wait(context.Background(), "gone", time.Millisecond, nil)
	if err == nil || j.State != "queued" {
		t.Errorf("Wait on a job that went = %+v, %v; want the error and the state seen", j, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := c.Wait(ctx, "j1", time.Millisecond, nil); !errors.Is(err, context.Canceled) {
		t.Errorf("Wait with a cancelled context: %v", err)
	}
}

func TestJobEnded(t *testing.T) {
	for state, want := range map[string]bool{"queued": false, "running": false, "done": true, "failed": true, "cancelled": true} {
		if got := (Job{State: state}).Ended(); got != want {
			t.Errorf("%s: Ended = %v", state, got)
		}
	}
}

// TestFailures: Failures gives the first n failed lines of the report and no others.
func TestFailures(t *testing.T) {
	report := `{"input":"a.png","status":"ok"}
{"input":"b.jpg","status":"failed","error":"decode: unexpected EOF"}
{"input":"c.png","status":"skipped"}
{"input":"d.jpg","status":"failed","error":"decode: empty file"}
{"summary":{"ok":1,"failed":2,"skipped":1}}
`
	fake := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/jobs/j1/report" {
			w.WriteHeader(http.StatusNotFound)
			json.NewEncoder(w).Encode(map[string]any{"error": "no job", "status": 404})
			return
		}
		w.Write([]byte(report))
	}))
	defer fake.Close()
	c := &Client{URL: fake.URL}
	needClient(t, c)
	for _, tc := range []struct {
		n    int
		want string
	}{{1, "b.jpg"}, {2, "b.jpg,d.jpg"}, {10, "b.jpg,d.jpg"}} {
		got, err := c.Failures(context.Background(), "j1", tc.n)
		var names []string
		for _, l := range got {
			names = append(names, l.Input)
		}
		if err != nil || strings.Join(names, ",") != tc.want {
			t.Errorf("Failures(%d) = %v, %v; want %s", tc.n, names, err, tc.want)
		}
	}
	if _, err := c.Failures(context.Background(), "nope", 3); err == nil {
		t.Error("Failures of an unknown job: no error")
	}
}
