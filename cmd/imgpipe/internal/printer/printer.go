// Package printer is the one way imgpipe writes to stderr during a command: as text for a
// person, or, under --progress json, as JSON Lines (docs/progress-json.md) where every line
// is one object with a "type", so that the stream stays machine-readable.
package printer

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync"
)

// The types of a JSON line: the "type" field of every object.
const (
	TypeProgress = "progress" // the counts, once a second and at the end
	TypeNotice   = "notice"   // what is only informative
	TypeWarning  = "warning"  // what the user must hear: a fallback, a cleanup that failed
	TypeFailure  = "failure"  // one input that failed
	TypeSummary  = "summary"  // what the run did, once at the end
	TypeError    = "error"    // why the command failed, with its exit code
)

// prefix begins every text message, so that it reads apart from other programs' output.
const prefix = "imgpipe: "

// Printer writes the messages of one command to its stderr; it is safe for concurrent use,
// and a line is never cut by another. As an io.Writer it passes text on as it is, and, in
// JSON mode, turns each line written into a notice, so that nothing can leave text in a
// JSON stream.
type Printer struct {
	mu      sync.Mutex
	w       io.Writer
	json    bool
	partial []byte // a line Write has not seen the end of (JSON mode)
}

// New returns a text Printer on w.
func New(w io.Writer) *Printer { return &Printer{w: w} }

// Of is w when it is a Printer (the command's stderr), or a text Printer on w.
func Of(w io.Writer) *Printer {
	if p, ok := w.(*Printer); ok {
		return p
	}
	return New(w)
}

// SetJSON switches the printer to JSON Lines (--progress json) or back to text.
func (p *Printer) SetJSON(on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.json = on
}

// JSON reports whether the printer writes JSON Lines.
func (p *Printer) JSON() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.json
}

// Underlying is the writer the printer writes to (a progress bar asks whether it is a
// terminal).
func (p *Printer) Underlying() io.Writer { return p.w }

// Write passes text on, or, in JSON mode, writes each complete line as a notice (without
// the "imgpipe: " prefix); it always reports len(b) written.
func (p *Printer) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.json {
		return p.w.Write(b)
	}
	p.partial = append(p.partial, b...)
	for {
		i := bytes.IndexByte(p.partial, '\n')
		if i < 0 {
			return len(b), nil
		}
		line := strings.TrimPrefix(strings.TrimSpace(string(p.partial[:i])), prefix)
		p.partial = p.partial[i+1:]
		if line != "" {
			p.object(event{Type: TypeNotice, Message: line})
		}
	}
}

// event is one JSON line other than progress; docs/progress-json.md is its schema.
type event struct {
	Type    string `json:"type"`
	Message string `json:"message,omitempty"`
	Input   string `json:"input,omitempty"`
	Error   string `json:"error,omitempty"`
	Exit    int    `json:"exit,omitempty"`
	Summary any    `json:"summary,omitempty"`
}

// object writes e as one JSON line; the caller holds mu.
func (p *Printer) object(e event) {
	b, err := json.Marshal(e)
	if err != nil { // a summary that does not marshal: a bug, said in JSON
		b, _ = json.Marshal(event{Type: TypeError, Message: err.Error()})
	}
	p.w.Write(append(b, '\n'))
}

// message writes a message of type typ: "imgpipe: msg" as text, {"type","message"} as JSON.
func (p *Printer) message(typ, msg string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.json {
		p.object(event{Type: typ, Message: msg})
		return
	}
	fmt.Fprintf(p.w, "%s%s\n", prefix, msg)
}

// Notice says something only informative.
func (p *Printer) Notice(msg string) { p.message(TypeNotice, msg) }

// Warning says what the user must hear although the command goes on.
func (p *Printer) Warning(msg string) { p.message(TypeWarning, msg) }

// Error says why the command ends with exit code code (not 0).
func (p *Printer) Error(msg string, code int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.json {
		p.object(event{Type: TypeError, Message: msg, Exit: code})
		return
	}
	fmt.Fprintf(p.w, "%s%s\n", prefix, msg)
}

// Failure says that one input failed, and why.
func (p *Printer) Failure(input, display, err string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.json {
		p.object(event{Type: TypeFailure, Input: input, Error: err})
		return
	}
	fmt.Fprintf(p.w, "%s%s: %s\n", prefix, display, err)
}

// Summary says what the run did: line as text; as JSON, summary (the report's summary
// object) with line as its message.
func (p *Printer) Summary(line string, summary any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.json {
		p.object(event{Type: TypeSummary, Message: line, Summary: summary})
		return
	}
	fmt.Fprintln(p.w, line)
}

// Progress writes one progress line, JSON mode only: the fields of counts (a struct that
// marshals to an object) after "type".
func (p *Printer) Progress(counts any) {
	b, err := json.Marshal(counts)
	if err != nil || len(b) < 2 || b[0] != '{' {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.json {
		return
	}
	line := `{"type":"` + TypeProgress + `"`
	if len(b) > 2 {
		line += ","
	}
	p.w.Write(append([]byte(line), append(b[1:], '\n')...))
}
