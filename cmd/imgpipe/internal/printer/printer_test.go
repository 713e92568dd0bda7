package printer

import (
	"fmt"
	"strings"
	"testing"
)

// TestPrinter: each kind of message as text and as JSON; in JSON mode, text written to the
// printer becomes notices, line by line, whatever the writes' boundaries.
func TestPrinter(t *testing.T) {
	for _, tc := range []struct {
		name       string
		say        func(p *Printer)
		text, json string
	}{
		{"notice", func(p *Printer) { p.Notice("removed 2 files") }, "imgpipe: removed 2 files\n", `{"type":"notice","message":"removed 2 files"}` + "\n"},
		{"warning", func(p *Printer) { p.Warning("no GPU") }, "imgpipe: no GPU\n", `{"type":"warning","message":"no GPU"}` + "\n"},
		{"error", func(p *Printer) { p.Error("bad", 2) }, "imgpipe: bad\n", `{"type":"error","message":"bad","exit":2}` + "\n"},
		{"failure", func(p *Printer) { p.Failure("a\nb.jpg", `"a\nb.jpg"`, "decode: EOF") }, "imgpipe: \"a\\nb.jpg\": decode: EOF\n",
			`{"type":"failure","input":"a\nb.jpg","error":"decode: EOF"}` + "\n"},
		{"summary", func(p *Printer) { p.Summary("processed 1 image", map[string]int{"ok": 1}) }, "processed 1 image\n",
			`{"type":"summary","message":"processed 1 image","summary":{"ok":1}}` + "\n"},
		{"progress", func(p *Printer) { p.Progress(struct{ Done int }{3}) }, "", `{"type":"progress","Done":3}` + "\n"},
		{"text in pieces", func(p *Printer) { fmt.Fprint(p, "imgpipe: one"); fmt.Fprint(p, " line\n\ntwo\n") }, "imgpipe: one line\n\ntwo\n",
			`{"type":"notice","message":"one line"}` + "\n" + `{"type":"notice","message":"two"}` + "\n"},
	} {
		for _, json := range []bool{false, true} {
			var b strings.Builder
			p := New(&b)
			p.SetJSON(json)
			tc.say(p)
			want := tc.text
			if json {
				want = tc.json
			}
			if b.String() != want {
				t.Errorf("%s, json %v: %q, want %q", tc.name, json, b.String(), want)
			}
		}
	}
	if p := New(nil); Of(p) != p || Of(&strings.Builder{}).JSON() {
		t.Error("Of: not the printer given, or a new one in JSON mode")
	}
}
