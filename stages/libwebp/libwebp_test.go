package libwebp

import (
	"bytes"
	"errors"
	"image"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/image/webp"

	"github.com/imgpipe/imgpipe/dynlib"
)

// needLib skips when libwebp is not installed: the tests below then have nothing to call.
func needLib(t *testing.T) {
	t.Helper()
	if err := Available(); err != nil {
		t.Skipf("libwebp not loadable (install libwebp7): %v", err)
	}
}

// randomRGB returns w×h RGB pixels with stride w*3+pad, the padding poisoned.
func randomRGB(w, h, pad int, seed uint64) ([]byte, int) {
	r := rand.New(rand.NewPCG(seed, 1))
	stride := w*3 + pad
	pix := make([]byte, stride*h)
	for i := range pix {
		pix[i] = byte(r.UintN(256))
		if i%stride >= w*3 {
			pix[i] = 0xAB
		}
	}
	return pix, stride
}

func decodeRGB(t *testing.T, data []byte) *image.NRGBA {
	t.Helper()
	m, err := webp.Decode(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("x/image/webp cannot decode the output: %v", err)
	}
	b := m.Bounds()
	out := image.NewNRGBA(b)
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			out.Set(x, y, m.At(x, y))
		}
	}
	return out
}

func TestEncodeLosslessRoundTrip(t *testing.T) {
	needLib(t)
	for _, tc := range []struct{ w, h, pad int }{{1, 1, 0}, {7, 5, 3}, {64, 33, 0}, {131, 17, 5}} {
		pix, stride := randomRGB(tc.w, tc.h, tc.pad, uint64(tc.w))
		data, err := Encode(pix, tc.w, tc.h, stride, Options{Lossless: true})
		if err != nil {
			t.Fatalf("%dx%d: %v", tc.w, tc.h, err)
		}
		got := decodeRGB(t, data)
		if b := got.Bounds(); b.Dx() != tc.w || b.Dy() != tc.h {
			t.Fatalf("decoded %v, want %dx%d", b, tc.w, tc.h)
		}
		for y := 0; y < tc.h; y++ {
			for x := 0; x < tc.w; x++ {
				p := got.Pix[y*got.Stride+4*x:]
				q := pix[y*stride+3*x:]
				if p[0] != q[0] || p[1] != q[1] || p[2] != q[2] || p[3] != 255 {
					t.Fatalf("%dx%d: pixel (%d,%d) = %v, want %v", tc.w, tc.h, x, y, p[:4], q[:3])
				}
			}
		}
	}
}

func TestEncodeLossyQuality(t *testing.T) {
	needLib(t)
	// A smooth gradient: lossy WebP keeps it close, and a higher quality gives a bigger file.
	w, h := 96, 64
	pix := make([]byte, w*h*3)
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			pix[(y*w+x)*3], pix[(y*w+x)*3+1], pix[(y*w+x)*3+2] = byte(2*x), byte(3*y), byte(x+y)
		}
	}
	sizes, mses := map[int]int{}, map[int]float64{}
	for _, q := range []int{10, 95} {
		data, err := Encode(pix, w, h, w*3, Options{Quality: q})
		if err != nil {
			t.Fatal(err)
		}
		sizes[q] = len(data)
		got := decodeRGB(t, data)
		var sum, n float64
		for y := 0; y < h; y++ {
			for x := 0; x < w; x++ {
				for c := 0; c < 3; c++ {
					d := float64(got.Pix[y*got.Stride+4*x+c]) - float64(pix[(y*w+x)*3+c])
					sum += d * d
					n++
				}
			}
		}
		mses[q] = sum / n
	}
	// Lossy WebP stores 4:2:0 YUV, and x/image/webp's YUV to RGB conversion is not libwebp's:
	// together a mean squared error of about 50 here; a wrong layout or stride costs thousands.
	if mses[95] > 80 || mses[95] >= mses[10] {
		t.Errorf("mean squared error %.1f at quality 95, %.1f at 10: want under 80 and less than at 10", mses[95], mses[10])
	}
	if sizes[95] <= sizes[10] {
		t.Errorf("quality 95 gave %d bytes, quality 10 %d: want a bigger file at the higher quality", sizes[95], sizes[10])
	}
}

func TestEncodeRefusesBadInput(t *testing.T) {
	pix, stride := randomRGB(4, 4, 0, 1)
	for _, tc := range []struct {
		name         string
		w, h, stride int
		opt          Options
		want         string
	}{
		{"zero width", 0, 4, stride, Options{Quality: 90}, "want 1..16383"},
		{"too wide", MaxDimension + 1, 1, 3 * (MaxDimension + 1), Options{Quality: 90}, "want 1..16383"},
		{"short stride", 4, 4, 11, Options{Quality: 90}, "do not hold"},
		{"short buffer", 4, 5, stride, Options{Quality: 90}, "do not hold"},
		{"quality 0", 4, 4, stride, Options{}, "quality 0"},
		{"quality 101", 4, 4, stride, Options{Quality: 101}, "quality 101"},
	} {
		_, err := Encode(pix, tc.w, tc.h, tc.stride, tc.opt)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one containing %q", tc.name, err, tc.want)
		}
	}
}

func TestOpenErrors(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "libwebp.so.7")
	t.Setenv("IMGPIPE_LIBWEBP", missing)
	_, err := open(Spec)
	if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), missing) || !strings.Contains(err.Error(), "libwebp7") {
		t.Errorf("override to a missing file: error %v, want ErrUnavailable naming %s and the package", err, missing)
	}
	// A library that loads but is not libwebp: the missing entry point is named.
	t.Setenv("IMGPIPE_LIBWEBP", "")
	libc := dynlib.Spec{Name: "libc", Sonames: []string{"libc.so.6"}}
	if _, err := dynlib.Open(libc); err != nil {
		t.Skipf("no libc.so.6 to stand in for a wrong library: %v", err)
	}
	_, err = open(libc)
	if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "WebPEncodeRGB") {
		t.Errorf("libc as libwebp: error %v, want ErrUnavailable naming WebPEncodeRGB", err)
	}
}
