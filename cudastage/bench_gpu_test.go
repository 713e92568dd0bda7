package cudastage_test

// The executor on the real device driven by package bench, as `imgpipe bench raw` drives it.
// These tests are an external package because bench reaches cudastage through the run
// lifecycle (pipeline/folderrun), which an internal test could not import.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/imgpipe/imgpipe/bench"
	"github.com/imgpipe/imgpipe/cudastage"
	"github.com/imgpipe/imgpipe/cudastage/cutest"
	"github.com/imgpipe/imgpipe/cudastage/sched"
	"github.com/imgpipe/imgpipe/pipeline"
)

// benchDevice opens the test GPU's device, ready for direct calls, closed at the end.
func benchDevice(t testing.TB) *cudastage.Device {
	t.Helper()
	g, err := cudastage.OpenGPU(cutest.Require(t))
	if err != nil {
		t.Fatal(err)
	}
	d := cudastage.NewDevice(g)
	t.Cleanup(func() {
		if err := d.Close(); err != nil {
			t.Error(err)
		}
		if err := g.Close(); err != nil {
			t.Error(err)
		}
	})
	if err := d.OpenErr(); err != nil {
		t.Fatal(err)
	}
	return d
}

// benchOps binds a pixel chain's device ops as a run does.
func benchOps(t testing.TB, spec string) []sched.Op {
	t.Helper()
	steps, err := pipeline.ParseSpec(spec)
	if err != nil {
		t.Fatal(err)
	}
	ops, err := pipeline.DeviceOps(steps)
	if err != nil {
		t.Fatal(err)
	}
	return ops
}

// TestGPUExecutorTrace checks the trace of a real run: valid JSON, one track
// per stream, every batch's H2D, kernels and D2H on its stream's track, not
// overlapping on one track, timed by CUDA events.
func TestGPUExecutorTrace(t *testing.T) {
	dev := benchDevice(t)
	tr := sched.NewTrace("imgpipe", 0)
	ops := benchOps(t, "grayscale | blur sigma=1.5 | transpose | histogram")
	cfg := bench.RunConfig{Streams: 4, Batch: 8, Frames: 256, Repeats: 1, Trace: tr}
	res, err := bench.RunFrames(context.Background(), dev, ops, bench.RandomPool(1920, 1080, 64, 3), cfg)
	if err != nil {
		t.Fatal(err)
	}
	st := res.Stats
	var buf bytes.Buffer
	if err := tr.WriteJSON(&buf); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		TraceEvents []struct {
			Name string         `json:"name"`
			Ph   string         `json:"ph"`
			Ts   float64        `json:"ts"`
			Dur  float64        `json:"dur"`
			Tid  int            `json:"tid"`
			Args map[string]any `json:"args"`
		} `json:"traceEvents"`
	}
	if err := json.Unmarshal(buf.Bytes(), &doc); err != nil {
		t.Fatalf("trace is not valid JSON: %v", err)
	}
	tracks := map[int]string{}
	count := map[string]int{}
	last := map[int]float64{}
	for _, ev := range doc.TraceEvents {
		switch ev.Ph {
		case "M":
			if ev.Name == "thread_name" {
				tracks[ev.Tid] = ev.Args["name"].(string)
			}
		case "X":
			name := tracks[ev.Tid]
			if !strings.Contains(name, "stream") {
				continue
			}
			count[ev.Name]++
			// 5 µs of slack: span starts come from float32 milliseconds
			// since the base event, durations from event pairs.
			if ev.Dur < 0 || ev.Ts < last[ev.Tid]-5 {
				t.Errorf("%s: span %s at %.1f µs (dur %.1f) starts before the previous one ends (%.1f)", name, ev.Name, ev.Ts, ev.Dur, last[ev.Tid])
			}
			last[ev.Tid] = ev.Ts + ev.Dur
		}
	}
	streams := 0
	for _, n := range tracks {
		if strings.HasPrefix(n, dev.Name()+" stream ") {
			streams++
		}
	}
	if streams != 4 {
		t.Errorf("%d stream tracks in %v, want 4", streams, tracks)
	}
	// The trace holds the timed run's batches.
	b := count["H2D"]
	if b < int(st.Batches) {
		t.Errorf("%d H2D spans for %d timed batches", b, st.Batches)
	}
	for _, op := range ops {
		if count[op.String()] != b || count["D2H"] != b {
			t.Errorf("%d %q spans and %d D2H, want %d each", count[op.String()], op, count["D2H"], b)
		}
	}
	t.Logf("trace: %d spans; %v", tr.Len(), st)
}

// BenchmarkGPURaw is `imgpipe bench raw` in a benchmark: the target chain
// (grayscale → blur σ1.5 → transpose → histogram) on 1080p random frames
// already in page-locked memory, for a sweep of streams and batch sizes,
// plus the textbook flow (pageable memory, one stream). It reports GP/s on
// host wall time, the overlap efficiency, and the fraction of the H2D-bound
// limit (measured pinned H2D bandwidth ÷ 3 bytes per pixel).
func BenchmarkGPURaw(b *testing.B) {
	dev := benchDevice(b)
	bw, err := bench.MeasureCopy(dev, 256<<20, 10, bench.DefaultCopyWarmup)
	if err != nil {
		b.Fatal(err)
	}
	limit := bw.H2D / 3 / 1e9 // GP/s
	b.Logf("%s: pinned H2D %.1f GB/s, D2H %.1f GB/s: H2D-bound limit %.2f GP/s for RGB frames",
		dev.Name(), bw.H2D/1e9, bw.D2H/1e9, limit)
	ops := benchOps(b, "grayscale | blur sigma=1.5 | transpose | histogram")
	pool := bench.RandomPool(1920, 1080, 64, 1)
	type run struct {
		streams, batch int
		pageable       bool
	}
	var runs []run
	for _, s := range []int{1, 2, 4, 8} {
		for _, bs := range []int{4, 8, 16, 32} {
			runs = append(runs, run{streams: s, batch: bs})
		}
	}
	runs = append(runs, run{streams: 1, batch: 16, pageable: true})
	for _, r := range runs {
		name := fmt.Sprintf("streams=%d/batch=%d", r.streams, r.batch)
		if r.pageable {
			name = fmt.Sprintf("pageable/streams=%d/batch=%d", r.streams, r.batch)
		}
		b.Run(name, func(b *testing.B) {
			cfg := bench.RunConfig{Streams: r.streams, Batch: r.batch, Pageable: r.pageable, Frames: 2048, Repeats: 1}
			var res bench.RunResult
			for b.Loop() {
				var err error
				res, err = bench.RunFrames(context.Background(), dev, ops, pool, cfg)
				if err != nil {
					b.Fatal(err)
				}
			}
			gps := float64(cfg.Frames) * 1920 * 1080 / res.Runs[0].Seconds() / 1e9
			b.ReportMetric(gps, "GP/s")
			b.ReportMetric(res.Stats.Overlap(), "overlap")
			b.ReportMetric(gps/limit, "of-H2D-limit")
			b.ReportMetric(0, "ns/op")
			b.Logf("%s: %.2f GP/s (%.0f%% of the H2D limit); %v; ops %v", name, gps, 100*gps/limit, res.Stats, res.Stats.Ops)
		})
	}
}
