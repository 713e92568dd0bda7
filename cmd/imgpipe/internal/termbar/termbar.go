// Package termbar draws a one-line progress bar on a terminal: a label, the percentage, a
// bar, the count, the rate and the time left, redrawn in place at most every Interval.
// It replaces a progress-bar library that links an unmaintained colour module; imgpipe
// needs only this one line.
package termbar

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
)

// Interval is the shortest time between two redraws; a redraw of every result would cost
// more than the work on a fast run.
const Interval = 100 * time.Millisecond

// minRateWindow is how long a run must have gone before the bar shows a rate or a time
// left: over the first milliseconds a count over the time is noise (thousands of images
// a second from the first one done).
const minRateWindow = time.Second

// width is the number of cells of the bar itself.
const width = 30

// Bar is a progress bar over a known number of items; its methods may be called from
// several goroutines.
type Bar struct {
	w           io.Writer
	label, unit string
	now         func() time.Time

	mu         sync.Mutex
	max, done  int
	start, hit time.Time // hit: the last redraw
	drawn      bool
}

// New returns a bar for max items (-1 or 0 when unknown: then it counts without a bar)
// that writes to w, which should be a terminal; unit names an item in the rate ("img").
func New(w io.Writer, max int, label, unit string) *Bar {
	return newAt(w, max, label, unit, time.Now)
}

func newAt(w io.Writer, max int, label, unit string, now func() time.Time) *Bar {
	return &Bar{w: w, max: max, label: label, unit: unit, now: now, start: now()}
}

// Add counts n more items done, and redraws when Interval has passed since the last time.
func (b *Bar) Add(n int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.done += n
	if t := b.now(); !b.drawn || t.Sub(b.hit) >= Interval || b.done == b.max {
		b.draw(t)
	}
}

// Set sets the items done and the total (-1 or 0 when unknown) to a count made elsewhere
// (a server's), and redraws as Add does.
func (b *Bar) Set(done, max int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.done, b.max = done, max
	if t := b.now(); !b.drawn || t.Sub(b.hit) >= Interval || b.done == b.max {
		b.draw(t)
	}
}

// Drop takes n items out of the total: items that need no work, so that the rate and the
// time left are those of the work. It does nothing to a bar of unknown total.
func (b *Bar) Drop(n int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.max > 0 {
		b.max = max(0, b.max-n)
	}
}

// Clear erases the bar's line, leaving the cursor at its start for what is printed next.
func (b *Bar) Clear() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.drawn {
		fmt.Fprint(b.w, "\r\x1b[K")
		b.drawn = false
	}
}

func (b *Bar) draw(t time.Time) {
	b.hit, b.drawn = t, true
	fmt.Fprintf(b.w, "\r%s\x1b[K", b.frame(t))
}

// frame is the bar's text at t: "imgpipe  40% |████      | 40/100 (12.5 img/s, 5s left)".
func (b *Bar) frame(t time.Time) string {
	var s strings.Builder
	s.WriteString(b.label)
	if b.max > 0 {
		frac := min(1, float64(b.done)/float64(b.max))
		full := int(frac * width)
		fmt.Fprintf(&s, " %3d%% |%s%s| %d/%d", int(frac*100), strings.Repeat("█", full), strings.Repeat(" ", width-full), b.done, b.max)
	} else {
		fmt.Fprintf(&s, " %d", b.done)
	}
	elapsed := t.Sub(b.start)
	if elapsed < minRateWindow || b.done == 0 {
		return s.String()
	}
	rate := float64(b.done) / elapsed.Seconds()
	fmt.Fprintf(&s, " (%.1f %s/s", rate, b.unit)
	if left := b.max - b.done; b.max > 0 && left > 0 {
		fmt.Fprintf(&s, ", %s left", time.Duration(float64(left)/rate*float64(time.Second)).Round(time.Second))
	}
	s.WriteString(")")
	return s.String()
}
