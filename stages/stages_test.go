package stages

import (
	"fmt"
	"image"
	"image/color"
	"math"
	"math/rand"
	"slices"
	"strings"
	"testing"

	"github.com/disintegration/imaging"
)

// The references below are deliberately naive: per pixel, straight from
// the formulas of docs/semantics.md, with explicit clamping and no reuse of the code
// under test.

func refGray(src *Image) *Image {
	out := NewImage(src.W, src.H, 1)
	for y := 0; y < src.H; y++ {
		for x := 0; x < src.W; x++ {
			if src.C == 1 {
				out.Pix[y*out.Stride+x] = at(src, x, y, 0)
				continue
			}
			r, g, b := uint32(at(src, x, y, 0)), uint32(at(src, x, y, 1)), uint32(at(src, x, y, 2))
			out.Pix[y*out.Stride+x] = byte((9798*r + 19235*g + 3735*b + 16384) >> 15)
		}
	}
	return out
}

func clampInt(v, lo, hi int) int { return min(max(v, lo), hi) }

// refBlur evaluates the blur definition directly: every h16 value from the
// 2r+1 clamped source pixels, every output from the 2r+1 clamped h16 values.
func refBlur(src *Image, taps []uint32) *Image {
	r := len(taps) / 2
	w, h, c := src.W, src.H, src.C
	h16 := make([]uint16, w*h*c)
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			for ch := 0; ch < c; ch++ {
				var s uint32
				for i := -r; i <= r; i++ {
					s += taps[i+r] * uint32(at(src, clampInt(x+i, 0, w-1), y, ch))
				}
				h16[(y*w+x)*c+ch] = uint16((s + 32) >> 6)
			}
		}
	}
	out := NewImage(w, h, c)
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			for ch := 0; ch < c; ch++ {
				var v uint32
				for j := -r; j <= r; j++ {
					v += taps[j+r] * uint32(h16[(clampInt(y+j, 0, h-1)*w+x)*c+ch])
				}
				out.Pix[(y*w+x)*c+ch] = byte((v + 1<<21) >> 22)
			}
		}
	}
	return out
}

// refBox averages the in-bounds part of each (2R+1)² window by brute force.
func refBox(src *Image, R int) *Image {
	out := NewImage(src.W, src.H, src.C)
	for y := 0; y < src.H; y++ {
		for x := 0; x < src.W; x++ {
			for ch := 0; ch < src.C; ch++ {
				sum, n := 0, 0
				for yy := y - R; yy <= y+R; yy++ {
					for xx := x - R; xx <= x+R; xx++ {
						if xx >= 0 && xx < src.W && yy >= 0 && yy < src.H {
							sum += int(at(src, xx, yy, ch))
							n++
						}
					}
				}
				out.Pix[(y*src.W+x)*src.C+ch] = byte(sum / n)
			}
		}
	}
	return out
}

// forShapes runs f for every test shape with C = 1 and C = 3.
func forShapes(t *testing.T, f func(t *testing.T, rng *rand.Rand, s shape, c int)) {
	for _, s := range testShapes {
		for _, c := range []int{1, 3} {
			t.Run(fmt.Sprintf("%v/c%d", s, c), func(t *testing.T) {
				f(t, rand.New(rand.NewSource(int64(s.w*1000+s.h*10+c+s.pad))), s, c)
			})
		}
	}
}

func TestGrayscale(t *testing.T) {
	forShapes(t, func(t *testing.T, rng *rand.Rand, s shape, c int) {
		src := randImage(rng, s.w, s.h, c, s.pad)
		dst := newPadded(s.w, s.h, 1, s.pad+1)
		Grayscale(dst, src)
		sameImage(t, dst, refGray(src))
		checkPadding(t, dst)
		checkPadding(t, src)
	})
}

// TestGrayscaleKnownValues pins the formula on values worked by hand
// (including OpenCV's results for pure primaries).
func TestGrayscaleKnownValues(t *testing.T) {
	for _, tc := range []struct{ r, g, b, y byte }{
		{0, 0, 0, 0}, {255, 255, 255, 255}, {255, 0, 0, 76}, {0, 255, 0, 150},
		{0, 0, 255, 29}, {1, 1, 1, 1}, {128, 128, 128, 128}, {10, 200, 30, 124},
	} {
		src := &Image{W: 1, H: 1, C: 3, Stride: 3, Pix: []byte{tc.r, tc.g, tc.b}}
		dst := NewImage(1, 1, 1)
		Grayscale(dst, src)
		if dst.Pix[0] != tc.y {
			t.Errorf("gray(%d,%d,%d) = %d, want %d", tc.r, tc.g, tc.b, dst.Pix[0], tc.y)
		}
	}
}

// TestGrayscaleAllColours runs every RGB triple through Grayscale, so that
// the rounding is checked where it matters (sums that land on a half).
func TestGrayscaleAllColours(t *testing.T) {
	src := NewImage(1<<16, 1, 3)
	dst := NewImage(1<<16, 1, 1)
	for r := 0; r < 256; r++ {
		for i := 0; i < 1<<16; i++ {
			src.Pix[3*i], src.Pix[3*i+1], src.Pix[3*i+2] = byte(r), byte(i>>8), byte(i)
		}
		Grayscale(dst, src)
		for i, got := range dst.Pix {
			want := (9798*r + 19235*(i>>8) + 3735*(i&255) + 16384) >> 15
			if int(got) != want {
				t.Fatalf("gray(%d,%d,%d) = %d, want %d", r, i>>8, i&255, got, want)
			}
		}
	}
}

func TestBlurTaps(t *testing.T) {
	golden := map[float64][]uint32{ // computed independently in Python
		0.3: {63, 16258, 63},
		0.8: {7, 359, 3741, 8170, 3741, 359, 7},
		1.5: {17, 124, 590, 1792, 3490, 4358, 3490, 1792, 590, 124, 17},
	}
	for _, sigma := range []float64{0.01, 0.3, 0.8, 1, 1.5, 3, 7.9, 16.5, 32} {
		taps := BlurTaps(sigma)
		r := max(1, int(math.Ceil(3*sigma)))
		if len(taps) != 2*r+1 {
			t.Fatalf("sigma %v: %d taps, want %d", sigma, len(taps), 2*r+1)
		}
		var sum uint32
		var gsum float64
		for i := -r; i <= r; i++ {
			gsum += math.Exp(-float64(i*i) / (2 * sigma * sigma))
		}
		for i, w := range taps {
			sum += w
			if w != taps[len(taps)-1-i] {
				t.Errorf("sigma %v: taps not symmetric at %d", sigma, i)
			}
			if i == r {
				continue
			}
			// Every tap but the centre is the rounded ideal weight.
			ideal := math.Exp(-float64((i-r)*(i-r))/(2*sigma*sigma)) / gsum * 16384
			if math.Abs(float64(w)-ideal) > 0.5 {
				t.Errorf("sigma %v: tap %d = %d, ideal %.3f", sigma, i-r, w, ideal)
			}
		}
		if sum != 16384 {
			t.Errorf("sigma %v: taps sum to %d", sigma, sum)
		}
		if g, ok := golden[sigma]; ok && !slices.Equal(g, taps) {
			t.Errorf("sigma %v: taps %v, want %v", sigma, taps, g)
		}
	}
}

func TestBlurTapsBadSigma(t *testing.T) {
	for _, s := range []float64{0, -1, 32.001, math.NaN(), math.Inf(1)} {
		t.Run(fmt.Sprint(s), func(t *testing.T) {
			mustPanic(t, "sigma", func() { BlurTaps(s) })
		})
	}
}

func TestBlur(t *testing.T) {
	for _, sigma := range []float64{0.3, 0.8, 1.5, 3, 7.9, 32} {
		taps := BlurTaps(sigma)
		t.Run(fmt.Sprint("sigma", sigma), func(t *testing.T) {
			forShapes(t, func(t *testing.T, rng *rand.Rand, s shape, c int) {
				src := randImage(rng, s.w, s.h, c, s.pad)
				dst := newPadded(s.w, s.h, c, s.pad+2)
				Blur(dst, src, taps)
				sameImage(t, dst, refBlur(src, taps))
				checkPadding(t, dst)
			})
		})
	}
}

// TestBlurInPlace checks the documented dst == src case, and that a second
// call (reusing pooled scratch from a bigger image) gives the same answer.
func TestBlurInPlace(t *testing.T) {
	rng := rand.New(rand.NewSource(7))
	taps := BlurTaps(2.2)
	big := randImage(rng, 300, 40, 3, 0)
	Blur(NewImage(300, 40, 3), big, taps)
	for _, s := range []shape{{17, 9, 4}, {5, 60, 0}} {
		src := randImage(rng, s.w, s.h, 3, s.pad)
		want := refBlur(src, taps)
		Blur(src, src, taps)
		sameImage(t, src, want)
		checkPadding(t, src)
	}
}

// TestBlurFlat checks a property independent of any reference: a flat image
// stays flat, whatever the sigma (the taps sum to exactly 1.0).
func TestBlurFlat(t *testing.T) {
	for _, v := range []byte{0, 1, 127, 254, 255} {
		src := NewImage(23, 11, 3)
		for i := range src.Pix {
			src.Pix[i] = v
		}
		for _, sigma := range []float64{0.5, 4, 32} {
			dst := NewImage(23, 11, 3)
			Blur(dst, src, BlurTaps(sigma))
			for i, got := range dst.Pix {
				if got != v {
					t.Fatalf("value %d sigma %v: byte %d became %d", v, sigma, i, got)
				}
			}
		}
	}
}

func TestBlurBadTaps(t *testing.T) {
	src := NewImage(4, 4, 1)
	for _, tc := range []struct {
		name string
		taps []uint32
		msg  string
	}{
		{"even", []uint32{8192, 8192}, "odd"},
		{"one", []uint32{16384}, "odd"},
		{"sum", []uint32{1, 16000, 1}, "sum"},
		{"asymmetric", []uint32{2, 16381, 1}, "symmetric"},
		{"lopsided", []uint32{100, 16184, 99, 1, 0}, "symmetric"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mustPanic(t, tc.msg, func() { Blur(NewImage(4, 4, 1), src, tc.taps) })
		})
	}
}

func TestBoxBlur(t *testing.T) {
	for R := 0; R <= MaxBoxRadius; R++ {
		t.Run(fmt.Sprint("r", R), func(t *testing.T) {
			forShapes(t, func(t *testing.T, rng *rand.Rand, s shape, c int) {
				src := randImage(rng, s.w, s.h, c, s.pad)
				dst := newPadded(s.w, s.h, c, s.pad+1)
				BoxBlur(dst, src, R)
				sameImage(t, dst, refBox(src, R))
				checkPadding(t, dst)
			})
		})
	}
}

// TestBoxBlurShapes covers sizes around 2R: all-border, exactly one
// interior column, and so on, in place as well.
func TestBoxBlurShapes(t *testing.T) {
	rng := rand.New(rand.NewSource(3))
	for _, R := range []int{1, 4, 15} {
		for _, w := range []int{2*R - 1, 2 * R, 2*R + 1, 2*R + 2, 3*R + 5} {
			if w < 1 {
				continue
			}
			for _, c := range []int{1, 3} {
				src := randImage(rng, w, w+3, c, 2)
				want := refBox(src, R)
				BoxBlur(src, src, R)
				sameImage(t, src, want)
				checkPadding(t, src)
			}
		}
	}
}

// TestBoxMagic checks the multiply-shift division against real division
// for every window count and every possible sum.
func TestBoxMagic(t *testing.T) {
	for n := 1; n < len(boxMagic); n++ {
		m := boxMagic[n]
		for s := uint64(0); s <= 255*uint64(n); s++ {
			if s*m>>32 != s/uint64(n) {
				t.Fatalf("floor(%d/%d): magic gives %d", s, n, s*m>>32)
			}
		}
	}
}

func TestBoxBlurBadRadius(t *testing.T) {
	for _, r := range []int{-1, 16, 100} {
		mustPanic(t, "radius", func() { BoxBlur(NewImage(3, 3, 1), NewImage(3, 3, 1), r) })
	}
}

func TestTranspose(t *testing.T) {
	forShapes(t, func(t *testing.T, rng *rand.Rand, s shape, c int) {
		src := randImage(rng, s.w, s.h, c, s.pad)
		dst := newPadded(s.h, s.w, c, s.pad+3)
		Transpose(dst, src)
		checkPadding(t, dst)
		want := imaging.Transpose(toStd(src)) // NRGBA, gray as R = G = B
		for y := 0; y < dst.H; y++ {
			for x := 0; x < dst.W; x++ {
				p := want.NRGBAAt(x, y)
				for ch, v := range []byte{p.R, p.G, p.B}[:c] {
					if got := at(dst, x, y, ch); got != v {
						t.Fatalf("(%d,%d) ch %d = %d, imaging says %d", x, y, ch, got, v)
					}
				}
			}
		}
	})
}

// TestTransposeLarge crosses several tiles in both directions with ragged
// edges, with 8×8 blocks and the bytes left over on both edges.
func TestTransposeLarge(t *testing.T) {
	rng := rand.New(rand.NewSource(11))
	for _, c := range []int{1, 3} {
		src := randImage(rng, 203, 141, c, 5)
		dst := newPadded(141, 203, c, 9)
		Transpose(dst, src)
		checkPadding(t, dst)
		for y := 0; y < src.H; y++ {
			for x := 0; x < src.W; x++ {
				for ch := 0; ch < c; ch++ {
					if at(dst, y, x, ch) != at(src, x, y, ch) {
						t.Fatalf("c%d: dst(%d,%d) != src(%d,%d)", c, y, x, x, y)
					}
				}
			}
		}
	}
}

func TestHistogram(t *testing.T) {
	forShapes(t, func(t *testing.T, rng *rand.Rand, s shape, c int) {
		src := randImage(rng, s.w, s.h, c, s.pad)
		var h [256]uint64
		for i := range h {
			h[i] = 99 // must be zeroed first
		}
		Histogram(&h, src)
		var want [256]uint64
		g := refGray(src)
		for _, v := range g.Pix {
			want[v]++
		}
		if h != want {
			t.Fatalf("histogram differs from the per-pixel count")
		}
	})
}

// TestStagePanics checks that shape mismatches are reported, naming the
// stage, instead of corrupting memory.
func TestStagePanics(t *testing.T) {
	rgb := NewImage(4, 3, 3)
	for _, tc := range []struct {
		name, msg string
		f         func()
	}{
		{"gray dst channels", "Grayscale", func() { Grayscale(NewImage(4, 3, 3), rgb) }},
		{"gray dst size", "Grayscale", func() { Grayscale(NewImage(3, 3, 1), rgb) }},
		{"gray nil", "nil", func() { Grayscale(nil, rgb) }},
		{"blur size", "Blur", func() { Blur(NewImage(4, 4, 3), rgb, BlurTaps(1)) }},
		{"box channels", "BoxBlur", func() { BoxBlur(NewImage(4, 3, 1), rgb, 1) }},
		{"transpose not swapped", "Transpose", func() { Transpose(NewImage(4, 3, 3), rgb) }},
		{"histogram bad src", "channels", func() {
			var h [256]uint64
			Histogram(&h, &Image{W: 1, H: 1, C: 2, Stride: 2, Pix: make([]byte, 2)})
		}},
		{"short buffer", "buffer", func() {
			Grayscale(NewImage(4, 3, 1), &Image{W: 4, H: 3, C: 3, Stride: 12, Pix: make([]byte, 20)})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) { mustPanic(t, tc.msg, tc.f) })
	}
}

// mustPanic fails unless f panics with a message containing msg.
func mustPanic(t *testing.T, msg string, f func()) {
	t.Helper()
	defer func() {
		t.Helper()
		r := recover()
		if r == nil {
			t.Fatalf("no panic, want one mentioning %q", msg)
		}
		if s := fmt.Sprint(r); !strings.Contains(s, msg) {
			t.Fatalf("panic %q does not mention %q", s, msg)
		}
	}()
	f()
}

// TestYCbCrConversion runs every (Y, Cb, Cr) triple through the 4:4:4
// conversion loop and compares with color.YCbCrToRGB.
func TestYCbCrConversion(t *testing.T) {
	m := image.NewYCbCr(image.Rect(0, 0, 1<<16, 1), image.YCbCrSubsampleRatio444)
	for i := range m.Cb {
		m.Cb[i], m.Cr[i] = byte(i>>8), byte(i)
	}
	conv := yCbCrRows(m)
	out := make([]byte, 3<<16)
	for y := 0; y < 256; y++ {
		for i := range m.Y {
			m.Y[i] = byte(y)
		}
		conv(0, out)
		for i := range m.Y {
			r, g, b := color.YCbCrToRGB(byte(y), m.Cb[i], m.Cr[i])
			if out[3*i] != r || out[3*i+1] != g || out[3*i+2] != b {
				t.Fatalf("YCbCr(%d,%d,%d) = %v, want %d,%d,%d", y, m.Cb[i], m.Cr[i], out[3*i:3*i+3], r, g, b)
			}
		}
	}
}
