package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"github.com/imgpipe/imgpipe/pipeline"
)

// maxListedFailures bounds the failures printed on stderr; the report has them all.
const maxListedFailures = 10

// progress shows a bar on stderr when stderr is a terminal (and not --quiet), and keeps the
// first failures to list after the run.
type progress struct {
	w        io.Writer
	bar      *progressbar.ProgressBar
	failures []string
	failed   int
}

func newProgress(stderr io.Writer, quiet bool, in, out string) *progress {
	p := &progress{w: stderr}
	f, ok := stderr.(*os.File)
	if quiet || !ok || !term.IsTerminal(int(f.Fd())) {
		return p
	}
	p.bar = progressbar.NewOptions(countInputs(in, out),
		progressbar.OptionSetWriter(stderr),
		progressbar.OptionSetDescription("imgpipe"),
		progressbar.OptionShowCount(),
		progressbar.OptionShowIts(),
		progressbar.OptionSetItsString("img"),
		progressbar.OptionThrottle(100*time.Millisecond),
		progressbar.OptionClearOnFinish(),
	)
	return p
}

// countInputs walks the input folder once, cheaply, to give the bar its total; -1 (a
// spinner) if the walk fails.
func countInputs(in, out string) int {
	src := pipeline.Folder(in, out)
	n := 0
	for {
		if _, err := src.Next(context.Background()); err != nil {
			if n == 0 {
				return -1
			}
			return n
		}
		n++
	}
}

// resultHook, when set, is called after every result is reported (its report line is in
// the journal by then). Tests set it to interrupt or kill a run at an exact point instead
// of racing it with a timer.
var resultHook func(*pipeline.Result)

func (p *progress) update(r *pipeline.Result) {
	if resultHook != nil {
		defer resultHook(r)
	}
	if r.Status == pipeline.StatusFailed {
		p.failed++
		if len(p.failures) < maxListedFailures {
			p.failures = append(p.failures, fmt.Sprintf("imgpipe: %s: %v", printable(r.Input), r.Err))
		}
	}
	if p.bar != nil {
		p.bar.Add(1)
	}
}

func (p *progress) finish() {
	if p.bar != nil {
		p.bar.Finish()
		p.bar.Clear()
	}
}

func (p *progress) printFailures() {
	for _, f := range p.failures {
		fmt.Fprintln(p.w, f)
	}
	if more := p.failed - len(p.failures); more > 0 {
		fmt.Fprintf(p.w, "imgpipe: ... and %d more failures (see the report)\n", more)
	}
}

// printable returns name as it is, or quoted with escapes when it holds characters a
// terminal would act on (a file name may carry escape sequences or newlines).
func printable(name string) string {
	if !utf8.ValidString(name) {
		return strconv.Quote(name)
	}
	for _, c := range name {
		if !unicode.IsPrint(c) {
			return strconv.Quote(name)
		}
	}
	return name
}
