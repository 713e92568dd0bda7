package stages

import (
	"fmt"
	"image"
	"image/color"
	"math/rand"
	"testing"
)

// poison fills stride padding so that a stage writing past W*C shows up.
const poison = 0xA5

// shape is one test image geometry; pad is extra bytes per row.
type shape struct{ w, h, pad int }

func (s shape) String() string { return fmt.Sprintf("%dx%d+%d", s.w, s.h, s.pad) }

// testShapes are the sizes the brief asks for, each tight and strided.
var testShapes = []shape{
	{1, 1, 0}, {1, 1, 5},
	{1, 37, 0}, {1, 37, 3},
	{41, 1, 0}, {41, 1, 7},
	{17, 9, 0}, {17, 9, 13},
	{1000, 3, 0}, {1000, 3, 64},
}

// newPadded returns a w×h×c image with pad bytes of poisoned padding per
// row (and after the last row too, to catch writes past it).
func newPadded(w, h, c, pad int) *Image {
	stride := w*c + pad
	m := &Image{W: w, H: h, C: c, Stride: stride, Pix: make([]byte, h*stride)}
	for i := range m.Pix {
		m.Pix[i] = poison
	}
	return m
}

// randImage returns a random w×h×c image with poisoned padding.
func randImage(rng *rand.Rand, w, h, c, pad int) *Image {
	m := newPadded(w, h, c, pad)
	for y := 0; y < h; y++ {
		rng.Read(m.Row(y))
	}
	return m
}

// checkPadding fails the test if any padding byte of m lost its poison.
func checkPadding(t *testing.T, m *Image) {
	t.Helper()
	for y := 0; y < m.H; y++ {
		for i := y*m.Stride + m.W*m.C; i < (y+1)*m.Stride && i < len(m.Pix); i++ {
			if m.Pix[i] != poison {
				t.Fatalf("padding byte %d of row %d was written (%#x)", i-y*m.Stride-m.W*m.C, y, m.Pix[i])
			}
		}
	}
}

// at returns channel ch of pixel (x, y), the plain way.
func at(m *Image, x, y, ch int) byte { return m.Pix[y*m.Stride+x*m.C+ch] }

// sameImage fails unless a and b have equal shapes and pixels.
func sameImage(t *testing.T, got, want *Image) {
	t.Helper()
	if got.W != want.W || got.H != want.H || got.C != want.C {
		t.Fatalf("got %dx%dx%d, want %dx%dx%d", got.W, got.H, got.C, want.W, want.H, want.C)
	}
	for y := 0; y < want.H; y++ {
		for x := 0; x < want.W; x++ {
			for ch := 0; ch < want.C; ch++ {
				if g, w := at(got, x, y, ch), at(want, x, y, ch); g != w {
					t.Fatalf("pixel (%d,%d) channel %d = %d, want %d", x, y, ch, g, w)
				}
			}
		}
	}
}

// toStd wraps an Image as a standard library image (gray or NRGBA) for the
// oracles that work on image.Image.
func toStd(m *Image) image.Image {
	if m.C == 1 {
		g := image.NewGray(image.Rect(0, 0, m.W, m.H))
		for y := 0; y < m.H; y++ {
			copy(g.Pix[y*g.Stride:], m.Row(y))
		}
		return g
	}
	n := image.NewNRGBA(image.Rect(0, 0, m.W, m.H))
	for y := 0; y < m.H; y++ {
		for x := 0; x < m.W; x++ {
			n.SetNRGBA(x, y, color.NRGBA{at(m, x, y, 0), at(m, x, y, 1), at(m, x, y, 2), 255})
		}
	}
	return n
}

// fromStd converts an image.Image to an RGB Image through At, channel by
// channel as the test's own decode oracle does.
func fromStd(src image.Image) *Image {
	b := src.Bounds()
	m := NewImage(b.Dx(), b.Dy(), 3)
	for y := 0; y < b.Dy(); y++ {
		for x := 0; x < b.Dx(); x++ {
			r, g, bl := oracleRGB(src.At(b.Min.X+x, b.Min.Y+y))
			o := y*m.Stride + 3*x
			m.Pix[o], m.Pix[o+1], m.Pix[o+2] = r, g, bl
		}
	}
	return m
}

// oracleRGB is the decode conversion rule of docs/semantics.md#decode written per colour
// value: stored colour kept, alpha dropped, 16-bit v>>8, YCbCr and CMYK
// through the standard library's 8-bit conversions.
func oracleRGB(c color.Color) (r, g, b byte) {
	switch c := c.(type) {
	case color.YCbCr:
		return color.YCbCrToRGB(c.Y, c.Cb, c.Cr)
	case color.NYCbCrA:
		return color.YCbCrToRGB(c.Y, c.Cb, c.Cr)
	case color.CMYK:
		return color.CMYKToRGB(c.C, c.M, c.Y, c.K)
	case color.Gray:
		return c.Y, c.Y, c.Y
	case color.Gray16:
		return byte(c.Y >> 8), byte(c.Y >> 8), byte(c.Y >> 8)
	case color.RGBA:
		return c.R, c.G, c.B
	case color.NRGBA:
		return c.R, c.G, c.B
	case color.RGBA64:
		return byte(c.R >> 8), byte(c.G >> 8), byte(c.B >> 8)
	case color.NRGBA64:
		return byte(c.R >> 8), byte(c.G >> 8), byte(c.B >> 8)
	}
	panic(fmt.Sprintf("oracle: colour type %T", c))
}
