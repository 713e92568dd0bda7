package pipeline

import (
	"bufio"
	"encoding/json"
	"io"
	"sync"
	"time"
)

// Tracer records timed spans on named tracks (one per worker, or per GPU stream) for a
// timeline view. Implementations must be safe for concurrent use.
type Tracer interface {
	Span(track, name string, start time.Time, d time.Duration, args map[string]any)
}

// TraceWriter is a Tracer that streams Chrome trace-event JSON (the JSON Array Format,
// which chrome://tracing and Perfetto open) to a writer: one "complete" event per span, and
// a thread-name event per track. Events are written as they come, so memory does not grow
// with the run; Close ends the array.
type TraceWriter struct {
	mu     sync.Mutex
	w      *bufio.Writer
	origin time.Time
	tracks map[string]int
	n      int
	err    error
}

// NewTraceWriter starts a trace on w; times are relative to origin.
func NewTraceWriter(w io.Writer, origin time.Time) *TraceWriter {
	t := &TraceWriter{w: bufio.NewWriter(w), origin: origin, tracks: map[string]int{}}
	_, t.err = t.w.WriteString("[\n")
	return t
}

type traceEvent struct {
	Name string         `json:"name"`
	Ph   string         `json:"ph"`
	Ts   float64        `json:"ts"`            // microseconds
	Dur  float64        `json:"dur,omitempty"` // microseconds
	Pid  int            `json:"pid"`
	Tid  int            `json:"tid"`
	Args map[string]any `json:"args,omitempty"`
}

// Span records one span on track.
func (t *TraceWriter) Span(track, name string, start time.Time, d time.Duration, args map[string]any) {
	t.mu.Lock()
	defer t.mu.Unlock()
	tid, ok := t.tracks[track]
	if !ok {
		tid = len(t.tracks) + 1
		t.tracks[track] = tid
		t.event(traceEvent{Name: "thread_name", Ph: "M", Pid: 1, Tid: tid, Args: map[string]any{"name": track}})
	}
	t.event(traceEvent{
		Name: name, Ph: "X", Pid: 1, Tid: tid, Args: args,
		Ts:  float64(start.Sub(t.origin).Nanoseconds()) / 1e3,
		Dur: float64(d.Nanoseconds()) / 1e3,
	})
}

func (t *TraceWriter) event(e traceEvent) {
	if t.err != nil {
		return
	}
	b, err := json.Marshal(e)
	if err != nil {
		t.err = err
		return
	}
	if t.n > 0 {
		t.w.WriteString(",\n")
	}
	t.n++
	_, t.err = t.w.Write(b)
}

// Close ends the JSON array and flushes; it returns the first write error, if any.
func (t *TraceWriter) Close() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.err == nil {
		_, t.err = t.w.WriteString("\n]\n")
	}
	if t.err == nil {
		t.err = t.w.Flush()
	}
	return t.err
}
