package engine

import (
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/imgpipe/imgpipe/pipeline"
	"github.com/imgpipe/imgpipe/pipeline/gpu"
)

// LatencyBuckets are the upper bounds, in seconds, of Stats.Latency's buckets.
var LatencyBuckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}

// BatchBuckets are the upper bounds, in images, of Stats.BatchSizes' buckets.
var BatchBuckets = []float64{1, 2, 4, 8, 16, 32, 64, 128}

// Stats is a snapshot of an Engine's counters since Open, for metrics.
type Stats struct {
	// Device is Engine.Device.
	Device string
	// Requests counts the requests done, by outcome: ok, failed (the input's own failure)
	// and error (an engine error: the caller left, a device fault).
	OK, Failed, Errors uint64
	// Busy counts the requests refused with ErrBusy.
	Busy uint64
	// Faults counts the resident runs that failed (a device fault), failing the requests
	// they held.
	Faults uint64
	// DeviceError is the sticky device error (one after which a GPU is unusable, as
	// cu.IsSticky says) that a resident run failed with, "" while there is none: once set,
	// every request fails, and a service should report itself not ready.
	DeviceError string
	// Queued is the requests admitted and not yet done; Chains the chains with a resident
	// run; Runs the folder runs in progress.
	Queued, Chains, Runs int
	// Latency counts the requests done by time from admission to outcome: Latency.Counts[i]
	// those of at most LatencyBuckets[i] seconds, the last count those above.
	Latency Histogram
	// BatchSizes counts the device batches of the resident runs by images, on
	// BatchBuckets; none on the CPU.
	BatchSizes Histogram
	// DeviceBusy is the time the resident runs' device batches spent in copies and kernels,
	// summed over streams (so it can exceed wall time when they overlap).
	DeviceBusy time.Duration
	// Memory is the page-locked and device memory the engine's pools hold, per GPU.
	Memory []gpu.PoolStats
}

// Histogram counts observations in buckets: Counts[i] those of at most Bounds[i], the last
// (len(Bounds)) those above every bound. Sum is the sum of the observations.
type Histogram struct {
	Bounds []float64
	Counts []uint64
	Sum    float64
}

// meter keeps the counters of Stats; it is the resident runs' tracer, from whose device
// spans it takes the batches and busy time.
type meter struct {
	set                 *gpu.Set
	ok, failed, errs    atomic.Uint64
	busy, faults        atomic.Uint64
	runs                atomic.Int64
	deviceBusy          atomic.Int64 // nanoseconds
	mu                  sync.Mutex
	latency, batchSizes Histogram
	deviceErr           string // Stats.DeviceError
}

// fault counts a resident run's failure, and keeps the first sticky device error.
func (m *meter) fault(err error) {
	m.faults.Add(1)
	var sticky interface{ Sticky() bool }
	if !errors.As(err, &sticky) || !sticky.Sticky() {
		return
	}
	m.mu.Lock()
	if m.deviceErr == "" {
		m.deviceErr = err.Error()
	}
	m.mu.Unlock()
}

func newMeter(set *gpu.Set) *meter {
	return &meter{set: set, latency: newHistogram(LatencyBuckets), batchSizes: newHistogram(BatchBuckets)}
}

func newHistogram(bounds []float64) Histogram {
	return Histogram{Bounds: bounds, Counts: make([]uint64, len(bounds)+1)}
}

func (h *Histogram) observe(v float64) {
	i := 0
	for i < len(h.Bounds) && v > h.Bounds[i] {
		i++
	}
	h.Counts[i]++
	h.Sum += v
}

func (h Histogram) clone() Histogram {
	h.Counts = append([]uint64(nil), h.Counts...)
	return h
}

// request counts one request's outcome.
func (m *meter) request(o outcome, d time.Duration) {
	switch {
	case o.err != nil:
		m.errs.Add(1)
	case o.res.Status == pipeline.StatusFailed:
		m.failed.Add(1)
	default:
		m.ok.Add(1)
	}
	m.mu.Lock()
	m.latency.observe(d.Seconds())
	m.mu.Unlock()
}

// Span implements pipeline.Tracer for the resident runs: the executor's "submit" span of a
// batch carries its images, and its other spans with a batch (copies, decode, kernels) the
// device's time. Host spans (a CPU stage's, a worker's) carry no batch.
func (m *meter) Span(_, name string, _ time.Time, d time.Duration, args map[string]any) {
	if _, ok := args["batch"]; !ok {
		return
	}
	if name != "submit" {
		m.deviceBusy.Add(int64(d))
		return
	}
	if n, ok := args["images"].(int); ok {
		m.mu.Lock()
		m.batchSizes.observe(float64(n))
		m.mu.Unlock()
	}
}

// Stats returns a snapshot of the engine's counters.
func (e *Engine) Stats() Stats {
	m := e.stats
	e.mu.Lock()
	chains := len(e.lanes)
	var mem []gpu.PoolStats
	if m.set != nil && !e.closed { // Close frees the pools under e.mu
		mem = m.set.PoolStats()
	}
	e.mu.Unlock()
	m.mu.Lock()
	lat, bs, devErr := m.latency.clone(), m.batchSizes.clone(), m.deviceErr
	m.mu.Unlock()
	return Stats{Device: e.device, OK: m.ok.Load(), Failed: m.failed.Load(), Errors: m.errs.Load(), Busy: m.busy.Load(),
		Faults: m.faults.Load(), DeviceError: devErr, Queued: int(e.held.Load()), Chains: chains, Runs: int(m.runs.Load()), Latency: lat, BatchSizes: bs,
		DeviceBusy: time.Duration(m.deviceBusy.Load()), Memory: mem}
}
