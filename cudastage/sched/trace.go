package sched

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// Tracer receives timed spans on named tracks. The executor sends one track
// per device stream (H2D, each op, D2H) and a submit track; the runner adds
// its decode and save workers' tracks. Device spans are timed by device
// events and placed on the host clock (see Executor), so host and device
// tracks share one time axis. pipeline.TraceWriter (streaming) and Trace
// (bounded, in memory, written atomically) both implement it.
// Implementations must be safe for concurrent use.
type Tracer interface {
	Span(track, name string, start time.Time, d time.Duration, args map[string]any)
}

// Trace collects spans for a Chrome trace-event file, the JSON format that
// Perfetto (ui.perfetto.dev) and chrome://tracing open. Each track is a
// thread (tid) of one process, named by thread_name metadata and ordered by
// first use. Spans are complete ("X") events with microsecond timestamps
// relative to the Trace's creation. A Trace is safe for concurrent use.
type Trace struct {
	mu      sync.Mutex
	t0      time.Time
	process string
	tracks  []string
	byName  map[string]int
	spans   []span
	max     int
	dropped int
}

type span struct {
	tid        int
	name       string
	start, dur time.Duration
	args       map[string]any
}

// DefaultMaxSpans bounds a trace's memory: about 100 bytes a span.
const DefaultMaxSpans = 1 << 21

// NewTrace starts a trace now, for a process named process (e.g. "imgpipe").
// It keeps at most maxSpans spans (0: DefaultMaxSpans); later ones are
// counted and dropped, and the file says how many were.
func NewTrace(process string, maxSpans int) *Trace {
	if maxSpans <= 0 {
		maxSpans = DefaultMaxSpans
	}
	return &Trace{t0: time.Now(), process: process, byName: map[string]int{}, max: maxSpans}
}

// track returns the tid of the named track, creating it. t.mu held.
func (t *Trace) track(name string) int {
	if tid, ok := t.byName[name]; ok {
		return tid
	}
	t.tracks = append(t.tracks, name)
	tid := len(t.tracks)
	t.byName[name] = tid
	return tid
}

// Span records a span of duration d from start on the named track; args
// (may be nil) are shown when the span is selected. A negative d is recorded
// as zero.
func (t *Trace) Span(track, name string, start time.Time, d time.Duration, args map[string]any) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.spans) >= t.max {
		t.dropped++
		return
	}
	t.spans = append(t.spans, span{tid: t.track(track), name: name, start: start.Sub(t.t0), dur: max(d, 0), args: args})
}

// Len is the number of spans recorded.
func (t *Trace) Len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.spans)
}

type traceEvent struct {
	Name string         `json:"name"`
	Ph   string         `json:"ph"`
	Ts   float64        `json:"ts"`
	Dur  *float64       `json:"dur,omitempty"`
	Pid  int            `json:"pid"`
	Tid  int            `json:"tid"`
	S    string         `json:"s,omitempty"`
	Args map[string]any `json:"args,omitempty"`
}

const tracePid = 1

func micros(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }

// WriteJSON writes the trace as {"traceEvents":[...],"displayTimeUnit":"ms"}.
func (t *Trace) WriteJSON(w io.Writer) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	first := true
	put := func(ev traceEvent) error {
		if !first {
			if err := bw.WriteByte(','); err != nil {
				return err
			}
		}
		first = false
		return enc.Encode(ev) // Encode's newline keeps the file diffable
	}
	if _, err := bw.WriteString(`{"displayTimeUnit":"ms","traceEvents":[`); err != nil {
		return err
	}
	meta := []traceEvent{{Name: "process_name", Ph: "M", Pid: tracePid, Args: map[string]any{"name": t.process}}}
	for i, name := range t.tracks {
		tid := i + 1
		meta = append(meta,
			traceEvent{Name: "thread_name", Ph: "M", Pid: tracePid, Tid: tid, Args: map[string]any{"name": name}},
			traceEvent{Name: "thread_sort_index", Ph: "M", Pid: tracePid, Tid: tid, Args: map[string]any{"sort_index": tid}})
	}
	for _, ev := range meta {
		if err := put(ev); err != nil {
			return err
		}
	}
	for _, s := range t.spans {
		dur := micros(s.dur)
		if err := put(traceEvent{Name: s.name, Ph: "X", Ts: micros(s.start), Dur: &dur,
			Pid: tracePid, Tid: s.tid, Args: s.args}); err != nil {
			return err
		}
	}
	if t.dropped > 0 {
		// An instant event at the end tells the reader the trace is cut.
		var end time.Duration
		if n := len(t.spans); n > 0 {
			end = t.spans[n-1].start + t.spans[n-1].dur
		}
		if err := put(traceEvent{Name: fmt.Sprintf("trace truncated: %d spans dropped", t.dropped), Ph: "i",
			S: "g", Ts: micros(end), Pid: tracePid}); err != nil {
			return err
		}
	}
	if _, err := bw.WriteString("]}\n"); err != nil {
		return err
	}
	return bw.Flush()
}

// WriteFile writes the trace to path atomically: a temporary file in the same
// folder, synced, then renamed, so a reader never sees half a trace.
func (t *Trace) WriteFile(path string) (err error) {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("trace: %w", err)
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	if err = t.WriteJSON(f); err != nil {
		return fmt.Errorf("trace: %w", err)
	}
	if err = f.Sync(); err != nil {
		return fmt.Errorf("trace: %w", err)
	}
	if err = f.Close(); err != nil {
		return fmt.Errorf("trace: %w", err)
	}
	if err = os.Rename(f.Name(), path); err != nil {
		return fmt.Errorf("trace: %w", err)
	}
	return nil
}
