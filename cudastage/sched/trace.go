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

// Trace collects spans for a Chrome trace-event file, the JSON format that
// Perfetto (ui.perfetto.dev) and chrome://tracing open. Each track is a
// thread (tid) of one process, named by thread_name metadata: the executor
// adds one per device stream, plus a "submit" track; the runner adds tracks
// for its decode and save workers. A Trace is safe for concurrent use.
//
// Spans are complete ("X") events with microsecond timestamps relative to
// the Trace's creation. Device spans are timed by device events and placed on
// the host clock by the executor (see Executor), so host and device tracks
// share one time axis.
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
	name, cat  string
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

// Track returns the tid of the track named name, creating it on first use.
// Tracks appear in the viewer in creation order.
func (t *Trace) Track(name string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	if tid, ok := t.byName[name]; ok {
		return tid
	}
	t.tracks = append(t.tracks, name)
	tid := len(t.tracks)
	t.byName[name] = tid
	return tid
}

// Span records a span from start to end on track tid. cat groups spans for
// the viewer's filters ("copy", "kernel", "decode", ...); args (may be nil)
// are shown when the span is selected. A span ending before it starts is
// recorded with zero duration.
func (t *Trace) Span(tid int, name, cat string, start, end time.Time, args map[string]any) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.spans) >= t.max {
		t.dropped++
		return
	}
	d := end.Sub(start)
	if d < 0 {
		d = 0
	}
	t.spans = append(t.spans, span{tid: tid, name: name, cat: cat, start: start.Sub(t.t0), dur: d, args: args})
}

// Len is the number of spans recorded.
func (t *Trace) Len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.spans)
}

type traceEvent struct {
	Name string         `json:"name"`
	Cat  string         `json:"cat,omitempty"`
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
		if err := put(traceEvent{Name: s.name, Cat: s.cat, Ph: "X", Ts: micros(s.start), Dur: &dur,
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
