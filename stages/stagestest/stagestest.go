// Package stagestest provides utilities for testing code that handles stages.Image values:
// random and photo-like images from a seed, encoded files of them, and a comparison that
// names the first difference.
// It is imported by tests only, as net/http/httptest and testing/fstest are.
package stagestest

import (
	"bytes"
	"fmt"
	"io"
	randv1 "math/rand"
	"math/rand/v2"
	"testing"

	"github.com/imgpipe/imgpipe/stages"
)

// RandImage returns a tightly packed w×h image with c channels whose bytes, in order, are
// byte(rng.Uint32()) of rng's next w·h·c values, so a seed always gives the same image.
func RandImage(rng *rand.Rand, w, h, c int) *stages.Image {
	m := stages.NewImage(w, h, c)
	for i := range m.Pix {
		m.Pix[i] = byte(rng.Uint32())
	}
	return m
}

// Smooth returns a w×h RGB gradient with a little noise from seed: a photo's stand-in, since
// a JPEG of pure noise is not what a decoder or a thumbnailer sees.
func Smooth(w, h int, seed int64) *stages.Image {
	rng := randv1.New(randv1.NewSource(seed))
	m := stages.NewImage(w, h, 3)
	for y := range h {
		row := m.Row(y)
		for x := range w {
			row[3*x], row[3*x+1], row[3*x+2] = byte(x*255/w), byte(y*255/h), byte(100+rng.Intn(16))
		}
	}
	return m
}

// Encode returns m encoded as format ("png", "jpeg", ...) with the save stage's defaults,
// failing t if it cannot be.
func Encode(t testing.TB, m *stages.Image, format string) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := stages.Encode(&b, m, stages.SaveOptions{Format: format}); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// ReadImage returns a tightly packed w×h image with c channels whose bytes are the next
// w·h·c bytes of r, read at once: a math/rand *Rand (version 1, whose Read keeps its place
// across calls) or a rand.ChaCha8 gives the same image for a seed. It panics if r runs short,
// which a generator never does.
func ReadImage(r io.Reader, w, h, c int) *stages.Image {
	m := stages.NewImage(w, h, c)
	if _, err := io.ReadFull(r, m.Pix); err != nil {
		panic(fmt.Sprintf("stagestest.ReadImage: %v", err))
	}
	return m
}

// Diff returns "" when got and want have the same shape and pixels (or are both nil), and
// otherwise says how they first differ: which is nil, their shapes, or the first pixel and
// channel (in row order) whose values differ. Row padding past W·C is not compared.
func Diff(got, want *stages.Image) string {
	switch {
	case got == nil && want == nil:
		return ""
	case got == nil || want == nil:
		return fmt.Sprintf("image %v, want %v", got != nil, want != nil)
	}
	if got.W != want.W || got.H != want.H || got.C != want.C {
		return fmt.Sprintf("shape %v, want %v", got.Shape(), want.Shape())
	}
	for y := range want.H {
		g, w := got.Row(y), want.Row(y)
		if bytes.Equal(g, w) {
			continue
		}
		for i := range w {
			if g[i] != w[i] {
				return fmt.Sprintf("pixel (%d, %d) channel %d = %d, want %d", i/want.C, y, i%want.C, g[i], w[i])
			}
		}
	}
	return ""
}
