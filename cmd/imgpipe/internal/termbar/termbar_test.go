package termbar

import (
	"strings"
	"testing"
	"time"
)

// clock is a time the test moves by hand.
type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func frames(out string) []string {
	var fs []string
	for _, f := range strings.Split(out, "\r") {
		if f != "" {
			fs = append(fs, strings.TrimSuffix(f, "\x1b[K"))
		}
	}
	return fs
}

func TestFrames(t *testing.T) {
	for _, tc := range []struct {
		name  string
		max   int
		steps []time.Duration // before each Add(1)
		drop  int             // Drop(drop) before the first Add
		want  []string        // every frame drawn
	}{
		{"first frame has no rate", 100, []time.Duration{time.Millisecond},
			0, []string{"imgpipe   1% |                              | 1/100"}},
		{"rate and time left after a second", 10, []time.Duration{0, 2 * time.Second},
			0, []string{"imgpipe  10% |███                           | 1/10", "imgpipe  20% |██████                        | 2/10 (1.0 img/s, 8s left)"}},
		{"redraws at most every Interval, and at the end", 3, []time.Duration{0, Interval / 3, Interval / 3},
			0, []string{"imgpipe  33% |██████████                    | 1/3", "imgpipe 100% |██████████████████████████████| 3/3"}},
		{"unknown total counts", -1, []time.Duration{0, 4 * time.Second},
			0, []string{"imgpipe 1", "imgpipe 2 (0.5 img/s)"}},
		{"done past the total stays at 100%", 1, []time.Duration{0, 2 * time.Second},
			0, []string{"imgpipe 100% |██████████████████████████████| 1/1", "imgpipe 100% |██████████████████████████████| 2/1 (1.0 img/s)"}},
		{"a dropped item leaves the total", 4, []time.Duration{0},
			2, []string{"imgpipe  50% |███████████████               | 1/2"}},
		{"dropping all makes the total unknown", 1, []time.Duration{0},
			1, []string{"imgpipe 1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out strings.Builder
			c := &clock{t: time.Unix(1000, 0)}
			b := newAt(&out, tc.max, "imgpipe", "img", c.now)
			b.Drop(tc.drop)
			for _, d := range tc.steps {
				c.t = c.t.Add(d)
				b.Add(1)
			}
			got := frames(out.String())
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("frames:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}

func TestClear(t *testing.T) {
	var out strings.Builder
	b := New(&out, 5, "x", "img")
	b.Clear() // nothing drawn: nothing to erase
	if out.Len() != 0 {
		t.Fatalf("Clear before a frame wrote %q", out.String())
	}
	b.Add(1)
	b.Clear()
	b.Clear()
	if s := out.String(); !strings.HasSuffix(s, "\r\x1b[K") || strings.Count(s, "\r\x1b[K") != 1 {
		t.Errorf("Clear after a frame: %q", s)
	}
}
