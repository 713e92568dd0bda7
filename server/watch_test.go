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

// Delete with watch.go when the server branch is merged (see there).

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

func TestJobFinished(t *testing.T) {
	for state, want := range map[string]bool{"queued": false, "running": false, "done": true, "failed": true, "cancelled": true} {
		if got := (Job{State: state}).Finished(); got != want {
			t.Errorf("%s: Finished = %v", state, got)
		}
	}
}
