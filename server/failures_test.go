package server

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// needClient skips a test of the Client while its bodies are the skeleton's stubs.
func needClient(t *testing.T, c *Client) {
	t.Helper()
	if _, err := c.Job(context.Background(), "probe"); err != nil && err.Error() == "not yet" {
		t.Skip("server.Client is still the skeleton's stub")
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
