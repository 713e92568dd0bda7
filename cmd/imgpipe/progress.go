package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unicode"
	"unicode/utf8"

	"golang.org/x/term"

	"github.com/imgpipe/imgpipe/cmd/imgpipe/internal/printer"
	"github.com/imgpipe/imgpipe/cmd/imgpipe/internal/termbar"
	"github.com/imgpipe/imgpipe/pipeline"
)

// maxListedFailures bounds the failures printed on stderr; the report has them all.
const maxListedFailures = 10

// The --progress modes.
const (
	progressAuto = "auto" // a bar when stderr is a terminal (and not --quiet)
	progressJSON = "json" // one JSON line a second on stderr, for orchestrators
	progressNone = "none"
)

var progressModes = []string{progressAuto, progressJSON, progressNone}

// progressInterval is how often --progress json writes a line.
const progressInterval = time.Second

// progress shows the run's progress on stderr (a bar, or JSON lines), keeps the first
// failures to list after the run, and counts the inputs in flight for the interrupt notice.
type progress struct {
	w        *printer.Printer
	bar      *termbar.Bar
	failures []failure

	mu                   sync.Mutex // guards the counts, which the JSON ticker reads
	ok, failed, skipped  int
	total                int       // -1 while unknown
	start                time.Time // of the run, for the rate
	yielded              atomic.Int64
	stopTicker, finished chan struct{}
}

// failure is one failed input listed after the run.
type failure struct{ input, err string }

// newProgress sets up the progress display for mode; count gives the number of inputs (a
// cheap walk; -1 when unknown) and is only called when a display needs it.
func newProgress(stderr io.Writer, quiet bool, mode string, count func() int) *progress {
	p := &progress{w: printer.Of(stderr), total: -1, start: time.Now()}
	switch mode {
	case progressJSON:
		p.total = count()
		p.stopTicker, p.finished = make(chan struct{}), make(chan struct{})
		go p.tick()
	case progressAuto:
		f, ok := p.w.Underlying().(*os.File)
		if quiet || !ok || !term.IsTerminal(int(f.Fd())) {
			return p
		}
		p.total = count()
		p.bar = termbar.New(stderr, p.total, "imgpipe", "img")
	}
	return p
}

// source wraps the run's source to count the inputs handed to the run.
func (p *progress) source(src pipeline.Source) pipeline.Source { return &countingSource{src, p} }

type countingSource struct {
	pipeline.Source
	p *progress
}

func (c *countingSource) Next(ctx context.Context) (pipeline.Input, error) {
	in, err := c.Source.Next(ctx)
	if err == nil {
		c.p.yielded.Add(1)
	}
	return in, err
}

// inFlight is the number of inputs handed to the run and not finished yet.
func (p *progress) inFlight() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return max(0, int(p.yielded.Load())-p.ok-p.failed-p.skipped)
}

// onInterrupt makes interrupted say at once, when ctx is cancelled (the first Ctrl-C),
// what the run does now. The function returned (idempotent) stops that; a notice already
// under way is waited for, so that it never interleaves with what the run prints next.
func (p *progress) onInterrupt(ctx context.Context) (stop func()) {
	done := make(chan struct{})
	stopAfter := context.AfterFunc(ctx, func() {
		defer close(done)
		p.interrupted()
	})
	var once sync.Once
	return func() {
		once.Do(func() {
			if !stopAfter() {
				<-done
			}
		})
	}
}

// interrupted says, at the first Ctrl-C, what the run does now.
func (p *progress) interrupted() {
	nl := ""
	if p.bar != nil {
		nl = "\n" // below the bar's line
	}
	fmt.Fprintf(p.w, "%simgpipe: interrupting: finishing %d images (Ctrl-C again to abort)\n", nl, p.inFlight())
}

// resultHook, when set, is called after every result is reported (its report line is in
// the journal by then). Tests set it to interrupt or kill a run at an exact point instead
// of racing it with a timer.
var resultHook func(*pipeline.Result)

func (p *progress) update(r *pipeline.Result) {
	if resultHook != nil {
		defer resultHook(r)
	}
	p.mu.Lock()
	switch r.Status {
	case pipeline.StatusFailed:
		p.failed++
		if len(p.failures) < maxListedFailures {
			p.failures = append(p.failures, failure{r.Input, fmt.Sprint(r.Err)})
		}
	case pipeline.StatusSkipped:
		p.skipped++
	default:
		p.ok++
	}
	p.mu.Unlock()
	if p.bar == nil {
		return
	}
	if r.Status == pipeline.StatusSkipped {
		// The bar counts this run's work only: a skipped input leaves the total, so the
		// rate and the time left are those of the images really processed.
		p.bar.Drop(1)
		return
	}
	p.bar.Add(1)
}

// counts sets the counts to a remote job's (run --server), for the bar and the JSON lines.
func (p *progress) counts(ok, failed, skipped int) {
	p.mu.Lock()
	p.ok, p.failed, p.skipped = ok, failed, skipped
	p.mu.Unlock()
	if p.bar != nil {
		total := p.total
		if total >= 0 {
			total -= skipped // as update does: the bar counts this run's work
		}
		p.bar.Set(ok+failed, total)
	}
}

// progressLine is one line of --progress json.
type progressLine struct {
	Done    int     `json:"done"`    // inputs finished: ok, failed and skipped
	OK      int     `json:"ok"`      // processed without error
	Failed  int     `json:"failed"`  // failed
	Skipped int     `json:"skipped"` // done before (--resume); not work of this run
	Total   int     `json:"total"`   // inputs in all; -1 when unknown
	Elapsed float64 `json:"elapsed_s"`
	Rate    float64 `json:"rate"`            // images processed (ok or failed) per second
	ETA     float64 `json:"eta_s,omitempty"` // seconds left at that rate; absent when unknown
}

// line returns the progress at now.
func (p *progress) line(now time.Time) progressLine {
	p.mu.Lock()
	defer p.mu.Unlock()
	l := progressLine{OK: p.ok, Failed: p.failed, Skipped: p.skipped, Total: p.total, Elapsed: now.Sub(p.start).Seconds()}
	l.Done = l.OK + l.Failed + l.Skipped
	if worked := l.OK + l.Failed; worked > 0 && l.Elapsed > 0 {
		l.Rate = float64(worked) / l.Elapsed
		if l.Total >= l.Done {
			l.ETA = float64(l.Total-l.Done) / l.Rate
		}
	}
	return l
}

func (p *progress) writeLine(now time.Time) { p.w.Progress(p.line(now)) }

// tick writes a JSON line every progressInterval until finish.
func (p *progress) tick() {
	defer close(p.finished)
	t := time.NewTicker(progressInterval)
	defer t.Stop()
	for {
		select {
		case now := <-t.C:
			p.writeLine(now)
		case <-p.stopTicker:
			return
		}
	}
}

func (p *progress) finish() {
	if p.stopTicker != nil {
		close(p.stopTicker)
		<-p.finished
		p.writeLine(time.Now()) // the final counts, always
	}
	if p.bar != nil {
		p.bar.Clear()
	}
}

func (p *progress) printFailures() {
	for _, f := range p.failures {
		p.w.Failure(f.input, printable(f.input), f.err)
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
