package server

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/imgpipe/imgpipe/engine"
)

// unmatched is the route label of requests no route took (404, 405).
const unmatched = "unmatched"

// metricSet is a server's Prometheus metrics: its own per route, and, written when
// scraped, the engine's (engine.Stats), the jobs' and the process's.
type metricSet struct {
	s   *Server
	set *metrics.Set
}

func newMetricSet(s *Server) *metricSet {
	m := &metricSet{s: s, set: metrics.NewSet()}
	m.set.RegisterMetricsWriter(m.writeState)
	return m
}

// request counts one answered request by route and status, and its time.
func (m *metricSet) request(pattern string, status int, d time.Duration) {
	if pattern == "" {
		pattern = unmatched
	}
	m.set.GetOrCreateCounter(fmt.Sprintf(`imgpipe_http_requests_total{route=%q,code="%d"}`, pattern, status)).Inc()
	m.set.GetOrCreatePrometheusHistogramExt(fmt.Sprintf(`imgpipe_http_request_duration_seconds{route=%q}`, pattern), engine.LatencyBuckets).Update(d.Seconds())
}

// writeState writes what is read when scraped: the engine's counters, queue, batches,
// device time and pools, and the jobs by state.
func (m *metricSet) writeState(w io.Writer) {
	st := m.s.eng.Stats()
	for _, o := range []struct {
		name string
		n    uint64
	}{{"ok", st.OK}, {"failed", st.Failed}, {"error", st.Errors}} {
		metrics.WriteCounterUint64(w, fmt.Sprintf(`imgpipe_engine_requests_total{outcome=%q}`, o.name), o.n)
	}
	metrics.WriteCounterUint64(w, "imgpipe_engine_busy_total", st.Busy)
	metrics.WriteGaugeUint64(w, "imgpipe_engine_queue_depth", uint64(st.Queued))
	metrics.WriteGaugeUint64(w, "imgpipe_engine_chains", uint64(st.Chains))
	metrics.WriteGaugeUint64(w, "imgpipe_engine_runs", uint64(st.Runs))
	metrics.WriteCounterFloat64(w, "imgpipe_engine_device_busy_seconds_total", st.DeviceBusy.Seconds())
	writeHistogram(w, "imgpipe_engine_latency_seconds", st.Latency)
	writeHistogram(w, "imgpipe_engine_batch_images", st.BatchSizes)
	for _, p := range st.Memory {
		pinned := []int64{p.Pinned.Budget, p.Pinned.Reserved, p.Pinned.InUse, p.Pinned.Peak}
		for i, kind := range []string{"budget", "reserved", "in_use", "peak"} {
			metrics.WriteGaugeUint64(w, fmt.Sprintf(`imgpipe_pool_pinned_bytes{device=%q,kind=%q}`, p.Device, kind), uint64(max(pinned[i], 0)))
		}
		device := []uint64{p.Memory.Budget, p.Memory.Allocated, p.Memory.Reserved, p.Memory.PeakReserved}
		for i, kind := range []string{"budget", "allocated", "reserved", "peak_reserved"} {
			metrics.WriteGaugeUint64(w, fmt.Sprintf(`imgpipe_pool_device_bytes{device=%q,kind=%q}`, p.Device, kind), device[i])
		}
	}
	states := []string{StateQueued, StateRunning, StateDone, StateFailed, StateCancelled}
	counts := make([]uint64, len(states))
	for _, j := range m.s.jobs.list() {
		counts[slices.Index(states, j.State)]++
	}
	for i, state := range states {
		metrics.WriteGaugeUint64(w, fmt.Sprintf(`imgpipe_jobs{state=%q}`, state), counts[i])
	}
}

// writeHistogram writes an engine histogram in Prometheus' cumulative form.
func writeHistogram(w io.Writer, name string, h engine.Histogram) {
	var cum uint64
	for i, b := range h.Bounds {
		cum += h.Counts[i]
		fmt.Fprintf(w, "%s_bucket{le=\"%g\"} %d\n", name, b, cum)
	}
	cum += h.Counts[len(h.Bounds)]
	fmt.Fprintf(w, "%s_bucket{le=\"+Inf\"} %d\n%s_sum %g\n%s_count %d\n", name, cum, name, h.Sum, name, cum)
}

// handleMetrics is GET /metrics: the server's and the process's metrics (Go runtime,
// resident memory, open files), Prometheus text format.
func (s *Server) handleMetrics(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	s.metrics.set.WritePrometheus(w)
	metrics.WriteProcessMetrics(w)
}

// handleHealth is GET /healthz: the process answers.
func (s *Server) handleHealth(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	io.WriteString(w, "ok\n")
}

// handleReady is GET /readyz: the engine is open and the server admits work.
func (s *Server) handleReady(w http.ResponseWriter, r *http.Request) {
	if !s.ready() {
		writeError(w, http.StatusServiceUnavailable, errors.New("not ready: the server is shutting down or its engine is closed"))
		return
	}
	// A device that failed for good fails every request: an orchestrator should restart
	// the server (the process stays up, so that /metrics and job states can still be read).
	if d := s.eng.Stats().DeviceError; d != "" {
		writeError(w, http.StatusServiceUnavailable, fmt.Errorf("not ready: the device failed: %s", d))
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	io.WriteString(w, "ready\n")
}
