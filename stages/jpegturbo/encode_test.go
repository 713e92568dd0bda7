package jpegturbo

import (
	"bytes"
	"image"
	"image/jpeg"
	"io"
	"strings"
	"testing"
)

// packed lays m out as rows of w*bpp bytes with pad poisoned bytes after each (a stride).
func packed(m image.Image, pad int) (pix []byte, stride int, f PixelFormat) {
	r := m.Bounds()
	f, bpp := PixelRGB, 3
	if _, ok := m.(*image.Gray); ok {
		f, bpp = PixelGray, 1
	}
	stride = r.Dx()*bpp + pad
	pix = bytes.Repeat([]byte{0xA5}, stride*r.Dy())
	for y := 0; y < r.Dy(); y++ {
		for x := 0; x < r.Dx(); x++ {
			o := y*stride + x*bpp
			switch g := m.(type) {
			case *image.Gray:
				pix[o] = g.GrayAt(x, y).Y
			case *image.RGBA:
				c := g.RGBAAt(x, y)
				pix[o], pix[o+1], pix[o+2] = c.R, c.G, c.B
			}
		}
	}
	return pix, stride, f
}

func TestEncode(t *testing.T) {
	requireLib(t)
	for _, tc := range []struct {
		w, h, pad, q int
		gray         bool
	}{
		{1, 1, 0, 95, false}, {1, 1, 3, 95, true}, {17, 9, 5, 90, false}, {17, 9, 1, 50, true},
		{256, 171, 0, 95, false}, {255, 169, 7, 75, false}, {64, 64, 0, 100, true}, {33, 65, 2, 1, false},
	} {
		src := photoLike(tc.w, tc.h, tc.gray, int64(tc.w*tc.h))
		pix, stride, f := packed(src, tc.pad)
		var b bytes.Buffer
		err := Encode(&b, pix, tc.w, tc.h, stride, f, tc.q)
		file := b.Bytes()
		if err != nil {
			t.Fatalf("%dx%d gray=%v: %v", tc.w, tc.h, tc.gray, err)
		}
		// Go's decoder reads it (a baseline file of the expected size and kind), and its
		// pixels are close to the source: within what quality allows on a smooth picture.
		got, err := jpeg.Decode(bytes.NewReader(file))
		if err != nil {
			t.Fatalf("%dx%d gray=%v: Go cannot decode the file: %v", tc.w, tc.h, tc.gray, err)
		}
		if got.Bounds().Dx() != tc.w || got.Bounds().Dy() != tc.h {
			t.Errorf("%dx%d: decoded %v", tc.w, tc.h, got.Bounds())
		}
		if _, isGray := got.(*image.Gray); isGray != tc.gray {
			t.Errorf("%dx%d gray=%v: decoded a %T", tc.w, tc.h, tc.gray, got)
		}
		// No worse than Go's encoder at that quality (same tables, same 4:2:0 layout).
		want, err := jpeg.Decode(bytes.NewReader(encode(t, src, tc.q)))
		if err != nil {
			t.Fatal(err)
		}
		if e, g := meanError(src, got), meanError(src, want); e > 1.2*g+0.5 {
			t.Errorf("%dx%d gray=%v q%d: mean error %.2f against the source, Go's encoder %.2f", tc.w, tc.h, tc.gray, tc.q, e, g)
		}
	}
}

// meanError is the mean absolute difference of a and b per channel.
func meanError(a, b image.Image) float64 {
	var sum, n float64
	r := a.Bounds()
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			r0, g0, b0, _ := a.At(x, y).RGBA()
			r1, g1, b1, _ := b.At(x, y).RGBA()
			for _, d := range []int{int(r0>>8) - int(r1>>8), int(g0>>8) - int(g1>>8), int(b0>>8) - int(b1>>8)} {
				sum += float64(max(d, -d))
				n++
			}
		}
	}
	return sum / n
}

// TestEncodeChecks: bad arguments are refused before the library sees them.
func TestEncodeChecks(t *testing.T) {
	pix := make([]byte, 30)
	for _, tc := range []struct {
		name         string
		w, h, stride int
		f            PixelFormat
		q            int
		buf          []byte
		want         string
	}{
		{"rgbx", 2, 2, 8, PixelRGBX, 90, pix, "not supported"},
		{"quality 0", 2, 2, 6, PixelRGB, 0, pix, "quality 0"},
		{"quality 101", 2, 2, 6, PixelRGB, 101, pix, "quality 101"},
		{"empty", 0, 2, 6, PixelRGB, 90, pix, "0x2"},
		{"too wide", 65536, 1, 3 * 65536, PixelRGB, 90, pix, "65535"},
		{"short stride", 4, 2, 11, PixelRGB, 90, pix, "stride 11"},
		{"short buffer", 4, 3, 12, PixelRGB, 90, pix, "buffer holds 30 bytes"},
	} {
		err := Encode(io.Discard, tc.buf, tc.w, tc.h, tc.stride, tc.f, tc.q)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Encode = %v, want an error with %q", tc.name, err, tc.want)
		}
	}
}

func BenchmarkEncodeThumbnail(b *testing.B) {
	if err := Available(); err != nil {
		b.Skip(err)
	}
	pix, stride, f := packed(photoLike(256, 171, false, 1), 0)
	for b.Loop() {
		if err := Encode(io.Discard, pix, 256, 171, stride, f, 95); err != nil {
			b.Fatal(err)
		}
	}
}
