package sched_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	. "github.com/imgpipe/imgpipe/cudastage/sched"
	"github.com/imgpipe/imgpipe/cudastage/sched/schedtest"
)

type parsedEvent struct {
	Name string         `json:"name"`
	Ph   string         `json:"ph"`
	Ts   float64        `json:"ts"`
	Dur  *float64       `json:"dur"`
	Pid  int            `json:"pid"`
	Tid  int            `json:"tid"`
	Args map[string]any `json:"args"`
}

func parseTrace(t *testing.T, data []byte) []parsedEvent {
	t.Helper()
	var doc struct {
		TraceEvents []parsedEvent `json:"traceEvents"`
		Unit        string        `json:"displayTimeUnit"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatalf("trace is not valid JSON: %v\n%s", err, data)
	}
	if doc.Unit != "ms" {
		t.Errorf("displayTimeUnit %q", doc.Unit)
	}
	return doc.TraceEvents
}

func TestExecutorTrace(t *testing.T) {
	tr := NewTrace("imgpipe", 0)
	ops := []Op{GrayscaleOp(), MustBlurOp(t, 1.5), TransposeOp(), HistogramOp()}
	dev := schedtest.NewFake(schedtest.FakeConfig{Name: "gpu0", H2DRate: 20e6, D2HRate: 40e6})
	e := startExec(t, context.Background(), dev, Config{Ops: ops, Streams: 3, Slots: 5, Batch: 4, SlotBytes: 40000, Trace: tr})
	imgs := mixedImages(1, 40)
	go func() {
		t0 := time.Now()
		pushAll(context.Background(), e, imgs, 2)
		tr.Span("decode 0", "decode", t0, time.Since(t0), map[string]any{"images": len(imgs)})
	}()
	for r := range e.Results() {
		r.Release()
	}
	if err := e.Wait(); err != nil {
		t.Fatal(err)
	}
	st := e.Stats()

	path := filepath.Join(t.TempDir(), "trace.json")
	if err := tr.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	evs := parseTrace(t, data)
	names := map[int]string{}
	spans := map[int][]parsedEvent{}
	for _, ev := range evs {
		switch ev.Ph {
		case "M":
			if ev.Name == "thread_name" {
				names[ev.Tid] = ev.Args["name"].(string)
			}
		case "X":
			if ev.Dur == nil || *ev.Dur < 0 || ev.Ts < 0 {
				t.Errorf("span %+v has a bad time", ev)
			}
			spans[ev.Tid] = append(spans[ev.Tid], ev)
		default:
			t.Errorf("unexpected event phase %q", ev.Ph)
		}
	}
	var tracks []string
	for _, n := range names {
		tracks = append(tracks, n)
	}
	sort.Strings(tracks)
	want := []string{"decode 0", "gpu0 stream 0", "gpu0 stream 1", "gpu0 stream 2", "gpu0 submit 0", "gpu0 submit 1", "gpu0 submit 2"}
	if !slices.Equal(tracks, want) {
		t.Errorf("tracks %v, want %v", tracks, want)
	}
	perName := map[string]int{}
	for tid, ss := range spans {
		name := names[tid]
		if name == "" {
			t.Errorf("spans on unnamed track %d", tid)
		}
		if !strings.Contains(name, "stream") {
			for _, s := range ss {
				perName[s.Name]++
			}
			continue
		}
		// A stream runs its work in order: its spans never overlap.
		sort.Slice(ss, func(i, j int) bool { return ss[i].Ts < ss[j].Ts })
		for i := 1; i < len(ss); i++ {
			if end := ss[i-1].Ts + *ss[i-1].Dur; ss[i].Ts < end-1 {
				t.Errorf("%s: %s at %.1fµs overlaps %s ending %.1fµs", name, ss[i].Name, ss[i].Ts, ss[i-1].Name, end)
			}
		}
		for _, s := range ss {
			perName[s.Name]++
		}
	}
	b := int(st.Batches)
	for _, n := range []string{"H2D", "grayscale", "blur sigma=1.5", "transpose", "histogram", "D2H"} {
		if perName[n] != b {
			t.Errorf("%d %q spans, want one per batch (%d)", perName[n], n, b)
		}
	}
	if perName["decode"] != 1 {
		t.Errorf("%d decode spans, want 1", perName["decode"])
	}
}

func TestTraceLimits(t *testing.T) {
	tr := NewTrace("p", 2)
	now := time.Now()
	for range 5 {
		tr.Span("a", "s", now, -time.Second, nil) // negative: zero duration
	}
	if tr.Len() != 2 {
		t.Errorf("Len = %d, want 2", tr.Len())
	}
	var buf bytes.Buffer
	if err := tr.WriteJSON(&buf); err != nil {
		t.Fatal(err)
	}
	evs := parseTrace(t, buf.Bytes())
	var x, trunc int
	for _, ev := range evs {
		if ev.Ph == "X" {
			x++
			if *ev.Dur != 0 {
				t.Errorf("reversed span has duration %v", *ev.Dur)
			}
		}
		if ev.Ph == "i" && strings.Contains(ev.Name, "3 spans dropped") {
			trunc++
		}
	}
	if x != 2 || trunc != 1 {
		t.Errorf("%d spans and %d truncation notes, want 2 and 1", x, trunc)
	}
	// An unwritable path is an error, and leaves nothing behind.
	dir := t.TempDir()
	if err := tr.WriteFile(filepath.Join(dir, "missing", "t.json")); err == nil {
		t.Error("WriteFile into a missing folder succeeded")
	}
	if err := tr.WriteFile(dir); err == nil {
		t.Error("WriteFile over a folder succeeded")
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("temporary files left: %v", ents)
	}
}
