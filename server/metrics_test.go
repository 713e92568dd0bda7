package server

import (
	"net/http"
	"regexp"
	"strings"
	"testing"
)

// sample is one line of the Prometheus text format: a name, labels, a number.
var sample = regexp.MustCompile(`^[a-zA-Z_:][a-zA-Z0-9_:]*(\{[a-zA-Z_][a-zA-Z0-9_]*="[^"]*"(, ?[a-zA-Z_][a-zA-Z0-9_]*="[^"]*")*\})? ([-+0-9.eE]+|NaN|[+-]Inf)$`)

// TestMetrics: /metrics is Prometheus text, with the requests by route and status, their
// latency, the engine's counters, queue, batches and device time, the jobs by state and
// the process's memory.
func TestMetrics(t *testing.T) {
	s := newServer(t, Config{})
	img := pngImage(t)
	call(s, http.MethodPost, processURL(thumb), img)
	call(s, http.MethodPost, processURL(thumb), img[:8])
	call(s, http.MethodGet, "/nothing", nil)
	w := call(s, http.MethodGet, "/metrics", nil)
	if w.Code != 200 || !strings.HasPrefix(w.Header().Get("Content-Type"), "text/plain") {
		t.Fatalf("%d %q", w.Code, w.Header().Get("Content-Type"))
	}
	text := w.Body.String()
	for _, line := range strings.Split(strings.TrimSpace(text), "\n") {
		if !strings.HasPrefix(line, "#") && !sample.MatchString(line) {
			t.Errorf("not a sample: %q", line)
		}
	}
	for _, want := range []string{
		`imgpipe_http_requests_total{route="POST /v1/process",code="200"} 1`,
		`imgpipe_http_requests_total{route="POST /v1/process",code="422"} 1`,
		`imgpipe_http_requests_total{route="unmatched",code="404"} 1`,
		`imgpipe_http_request_duration_seconds_bucket{route="POST /v1/process",le="+Inf"} 2`,
		`imgpipe_engine_requests_total{outcome="ok"} 1`,
		`imgpipe_engine_requests_total{outcome="failed"} 1`,
		`imgpipe_engine_latency_seconds_count 2`,
		`imgpipe_engine_batch_images_bucket{le="+Inf"} 0`,
		`imgpipe_engine_queue_depth 0`,
		`imgpipe_engine_chains 1`,
		`imgpipe_engine_device_busy_seconds_total 0`,
		`imgpipe_jobs{state="running"} 0`,
		`process_resident_memory_bytes `,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("no %q in\n%s", want, text)
		}
	}
}
