package bench

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"image"
	_ "image/jpeg" // DecodeConfig of the photos' sizes
	_ "image/png"
	"io/fs"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// photo is one file of the load's folder, held in memory so that reading it costs the
// load nothing.
type photo struct {
	name string  // slash-separated path relative to the folder
	data []byte  // the file's bytes
	mp   float64 // its megapixels from its header; 0 when the header was not read
}

// photoExts are the files a load sends: the formats a thumbnail request takes.
var photoExts = []string{".jpg", ".jpeg", ".png"}

// loadPhotos reads every photo under dir, in name order.
func loadPhotos(dir string) ([]photo, error) {
	var out []photo
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !slices.Contains(photoExts, strings.ToLower(filepath.Ext(path))) {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		p := photo{name: filepath.ToSlash(rel), data: data}
		if cfg, _, err := image.DecodeConfig(bytes.NewReader(data)); err == nil {
			p.mp = float64(cfg.Width) * float64(cfg.Height) / 1e6
		}
		out = append(out, p)
		return nil
	})
	if err != nil {
		return nil, optionErrorf("photo folder: %v", err)
	}
	if len(out) == 0 {
		return nil, optionErrorf("photo folder %s has no %s file", dir, strings.Join(photoExts, ", "))
	}
	return out, nil
}

// outcome is how one request ended: its code ("ok", "busy", "failed", "error" in-process;
// the HTTP status, or "transport", over HTTP), whether it succeeded, and the error or
// reason that came with it.
type outcome struct {
	code string
	ok   bool
	err  error
}

// sample is one measured request.
type sample struct {
	outcome
	lat time.Duration
	mp  float64
}

// target sends one request for p and says how it ended.
type target interface {
	do(ctx context.Context, p *photo) outcome
}

// measure runs one request of photo i (round-robin) and times it from start.
func measure(ctx context.Context, t target, photos []photo, i int, start time.Time) sample {
	p := &photos[i%len(photos)]
	o := t.do(ctx, p)
	return sample{outcome: o, lat: time.Since(start), mp: p.mp}
}

// closedLoop runs clients concurrent clients, each sending its next request when the last
// one ends, until n requests (n > 0) or until d has passed; after is called with the count
// of requests done after each one. It returns the samples and the wall time.
func closedLoop(ctx context.Context, t target, photos []photo, clients, n int, d time.Duration, after func(done int)) ([]sample, time.Duration) {
	var next, done atomic.Int64
	var mu sync.Mutex
	var all []sample
	var wg sync.WaitGroup
	start := time.Now()
	deadline := start.Add(d)
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []sample
			for ctx.Err() == nil {
				i := int(next.Add(1) - 1)
				if (n > 0 && i >= n) || (n == 0 && !time.Now().Before(deadline)) {
					break
				}
				mine = append(mine, measure(ctx, t, photos, i, time.Now()))
				if after != nil {
					after(int(done.Add(1)))
				}
			}
			mu.Lock()
			all = append(all, mine...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	return all, time.Since(start)
}

// maxInFlight bounds an open loop's requests in progress: past it arrivals are dropped
// (code "dropped"), as a client would give up, rather than piling up goroutines.
const maxInFlight = 4096

// openLoop sends request i at start+at[i], whether or not earlier ones have ended (a
// constant arrival rate), and times each from its scheduled arrival, so that a late
// server is charged for the wait it caused. It returns the samples and the wall time to
// the last answer.
func openLoop(ctx context.Context, t target, photos []photo, at []time.Duration) ([]sample, time.Duration) {
	var mu sync.Mutex
	var all []sample
	var wg sync.WaitGroup
	var inFlight atomic.Int64
	start := time.Now()
	for i, off := range at {
		when := start.Add(off)
		if w := time.Until(when); w > 0 {
			select {
			case <-time.After(w):
			case <-ctx.Done():
			}
		}
		if ctx.Err() != nil {
			break
		}
		if inFlight.Load() >= maxInFlight {
			mu.Lock()
			all = append(all, sample{outcome: outcome{code: "dropped"}})
			mu.Unlock()
			continue
		}
		inFlight.Add(1)
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer inFlight.Add(-1)
			s := measure(ctx, t, photos, i, when)
			mu.Lock()
			all = append(all, s)
			mu.Unlock()
		}()
	}
	wg.Wait()
	return all, time.Since(start)
}

// arrivals are the offsets from the start of n requests at rate per second: evenly spaced,
// or with exponential gaps (a Poisson process) drawn from rng.
func arrivals(rate float64, n int, poisson bool, rng *rand.Rand) []time.Duration {
	at := make([]time.Duration, n)
	t := 0.0
	for i := range at {
		at[i] = time.Duration(t * float64(time.Second))
		gap := 1 / rate
		if poisson {
			gap = rng.ExpFloat64() / rate
		}
		t += gap
	}
	return at
}

// Latency is a phase's latency distribution in milliseconds, over its successful requests.
type Latency struct {
	P50 float64 `json:"p50"`
	P90 float64 `json:"p90"`
	P99 float64 `json:"p99"`
	Max float64 `json:"max"`
}

// percentile is the nearest-rank p-th percentile (0 < p ≤ 100) of sorted: the smallest
// value with at least p% of the values at or below it; 0 for no values.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	k := int(math.Ceil(p/100*float64(len(sorted)))) - 1
	return sorted[min(max(k, 0), len(sorted)-1)]
}

// latencies summarises lats (sorting them).
func latencies(lats []time.Duration) Latency {
	slices.Sort(lats)
	ms := func(d time.Duration) float64 { return math.Round(d.Seconds()*1e5) / 100 }
	return Latency{P50: ms(percentile(lats, 50)), P90: ms(percentile(lats, 90)), P99: ms(percentile(lats, 99)), Max: ms(percentile(lats, 100))}
}

// Phase is one measured stretch of a load: the saturated run, or an open loop at a fraction
// of its rate.
type Phase struct {
	Name       string         `json:"name"`                       // "saturated", or "load 0.5"
	Clients    int            `json:"clients,omitempty"`          // closed loop: concurrent clients
	TargetRate float64        `json:"target_req_per_s,omitempty"` // open loop: the arrival rate
	Requests   int            `json:"requests"`                   // requests sent
	OK         int            `json:"ok"`                         // of which succeeded
	Seconds    float64        `json:"seconds"`                    // wall time
	ReqPerS    float64        `json:"req_per_s"`                  // successful requests per second
	MpixPerS   float64        `json:"mpix_per_s"`                 // their input megapixels per second
	LatencyMS  Latency        `json:"latency_ms"`                 // of the successful requests
	Errors     map[string]int `json:"errors,omitempty"`           // the others, by code
	// FirstErrors holds, per code, the first reason that came with it.
	FirstErrors map[string]string `json:"first_errors,omitempty"`
	// Batches counts the device batches of the phase by images (in-process, on a GPU).
	Batches *Batches `json:"batches,omitempty"`
}

// phase summarises samples taken over wall.
func phase(name string, samples []sample, wall time.Duration) Phase {
	p := Phase{Name: name, Requests: len(samples), Seconds: round3(wall.Seconds())}
	var lats []time.Duration
	mp := 0.0
	for _, s := range samples {
		if s.ok {
			p.OK++
			lats = append(lats, s.lat)
			mp += s.mp
			continue
		}
		if p.Errors == nil {
			p.Errors, p.FirstErrors = map[string]int{}, map[string]string{}
		}
		p.Errors[s.code]++
		if _, seen := p.FirstErrors[s.code]; !seen && s.err != nil {
			p.FirstErrors[s.code] = s.err.Error()
		}
	}
	if wall > 0 {
		p.ReqPerS, p.MpixPerS = round3(float64(p.OK)/wall.Seconds()), round3(mp/wall.Seconds())
	}
	p.LatencyMS = latencies(lats)
	return p
}

func round3(v float64) float64 { return math.Round(v*1000) / 1000 }

// errorsText is "none" or "429: 3, transport: 1 (the first: ...)", codes in order.
func (p *Phase) errorsText() string {
	if len(p.Errors) == 0 {
		return "none"
	}
	codes := make([]string, 0, len(p.Errors))
	for c := range p.Errors {
		codes = append(codes, c)
	}
	slices.Sort(codes)
	var b strings.Builder
	for i, c := range codes {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s: %d", c, p.Errors[c])
		if e := p.FirstErrors[c]; e != "" {
			fmt.Fprintf(&b, " (first: %s)", e)
		}
	}
	return b.String()
}

// RSS is a process's resident memory in MiB: its peak (VmHWM) and current (VmRSS) value.
type RSS struct {
	Requests int     `json:"requests,omitempty"` // requests done when it was read
	PeakMiB  float64 `json:"peak_mib"`
	MiB      float64 `json:"mib"`
}

// readRSS reads the resident memory of process pid (0: this process) from /proc.
func readRSS(pid int) (RSS, error) {
	who := "self"
	if pid > 0 {
		who = strconv.Itoa(pid)
	}
	f, err := os.Open("/proc/" + who + "/status")
	if err != nil {
		return RSS{}, err
	}
	defer f.Close()
	var r RSS
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		key, val, ok := strings.Cut(sc.Text(), ":")
		if !ok || (key != "VmHWM" && key != "VmRSS") {
			continue
		}
		kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(val), " kB"), 64)
		if err != nil {
			return RSS{}, fmt.Errorf("/proc/%s/status: %s: %v", who, key, err)
		}
		if key == "VmHWM" {
			r.PeakMiB = round3(kb / 1024)
		} else {
			r.MiB = round3(kb / 1024)
		}
	}
	return r, sc.Err()
}
