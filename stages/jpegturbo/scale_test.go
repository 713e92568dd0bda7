package jpegturbo

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
)

func TestScaledSize(t *testing.T) {
	for _, tc := range []struct{ w, h, d, sw, sh int }{
		{4000, 3000, 1, 4000, 3000},
		{4000, 3000, 8, 500, 375},
		{4001, 2999, 8, 501, 375},
		{1, 1, 8, 1, 1},
		{9, 17, 2, 5, 9},
		{33, 21, 4, 9, 6},
	} {
		if sw, sh := ScaledSize(tc.w, tc.h, tc.d); sw != tc.sw || sh != tc.sh {
			t.Errorf("ScaledSize(%d, %d, %d) = %d, %d; want %d, %d", tc.w, tc.h, tc.d, sw, sh, tc.sw, tc.sh)
		}
	}
	for d, want := range map[int]bool{0: false, 1: true, 2: true, 3: false, 4: true, 8: true, 16: false, -2: false} {
		if ValidDenom(d) != want {
			t.Errorf("ValidDenom(%d) = %v", d, !want)
		}
	}
}

// TestAppliedDenom: the scale tjDecompress2 really applies, for sizes where it is the asked
// one and for sides of a few pixels where a larger factor fits the same size; each is checked
// against djpeg at that scale, which applies exactly the scale it is given.
func TestAppliedDenom(t *testing.T) {
	for _, tc := range []struct {
		w, h, d, want int
		ok            bool
	}{
		{4000, 3000, 8, 8, true},
		{301, 203, 4, 4, true},
		{9, 9, 8, 8, true},
		{17, 1, 2, 2, true},
		{1, 1, 8, 1, true},  // 1/1 already gives 1x1
		{2, 3, 8, 4, true},  // 1/4 gives 1x1
		{2, 2, 8, 2, true},  // 1/2 gives 1x1
		{1, 2, 4, 2, true},  // 1/2 gives 1x1
		{5, 5, 4, 0, false}, // 3/8 gives 2x2
		{3, 3, 2, 0, false}, // 5/8 gives 2x2
		{7, 3, 1, 1, true},
	} {
		got, ok := AppliedDenom(tc.w, tc.h, tc.d)
		if got != tc.want || ok != tc.ok {
			t.Errorf("AppliedDenom(%d, %d, %d) = %d, %v; want %d, %v", tc.w, tc.h, tc.d, got, ok, tc.want, tc.ok)
		}
	}
	requireLib(t)
	for _, sz := range [][2]int{{2, 3}, {1, 2}, {2, 2}, {3, 5}, {4, 4}, {9, 2}, {1, 1}} {
		data := encode(t, photoLike(sz[0], sz[1], false, 15), 95)
		for _, d := range ScaleDenoms {
			k, ok := AppliedDenom(sz[0], sz[1], d)
			if !ok {
				continue
			}
			w, h := ScaledSize(sz[0], sz[1], d)
			pix := make([]byte, 3*w*h)
			if err := DecodeScaled(data, pix, d, w, h, 3*w, PixelRGB); err != nil {
				t.Fatal(err)
			}
			if dw, dh, want := djpegScaled(t, data, k); dw != w || dh != h || !bytes.Equal(pix, want) {
				t.Errorf("%dx%d at 1/%d: differs from djpeg at 1/%d (%dx%d)", sz[0], sz[1], d, k, dw, dh)
			}
		}
	}
}

// djpegScaled decodes data with libjpeg-turbo's djpeg at 1/denom into
// packed RGB (gray files are expanded), or skips the test without djpeg.
func djpegScaled(t *testing.T, data []byte, denom int) (w, h int, pix []byte) {
	t.Helper()
	djpeg, err := exec.LookPath("djpeg")
	if err != nil {
		t.Skip("djpeg not found (apt-get install libjpeg-turbo-progs)")
	}
	in := t.TempDir() + "/in.jpg"
	if err := os.WriteFile(in, data, 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(djpeg, "-scale", fmt.Sprintf("1/%d", denom), "-pnm", in).Output()
	if err != nil {
		t.Fatalf("djpeg: %v", err)
	}
	var magic string
	var maxv int
	n, err := fmt.Fscan(bytes.NewReader(out), &magic, &w, &h, &maxv)
	if err != nil || n != 4 || maxv != 255 {
		t.Fatalf("djpeg output header: %q %v", out[:min(len(out), 20)], err)
	}
	body := out[len(out)-map[string]int{"P6": 3, "P5": 1}[magic]*w*h:]
	if magic == "P6" {
		return w, h, body
	}
	pix = make([]byte, 0, 3*w*h)
	for _, v := range body {
		pix = append(pix, v, v, v)
	}
	return w, h, pix
}

// TestDecodeScaledMatchesDjpeg checks sizes and pixels of each scale
// against djpeg -scale 1/N, libjpeg-turbo's own scaled decode (the same
// IDCT and upsampling settings: islow, fancy), on odd sizes, gray, every
// chroma subsampling, and a progressive file.
func TestDecodeScaledMatchesDjpeg(t *testing.T) {
	requireLib(t)
	files := map[string][]byte{
		"photo 301x203": encode(t, photoLike(301, 203, false, 11), 90),
		"gray 77x5":     encode(t, photoLike(77, 5, true, 12), 80),
		"1x1":           encode(t, photoLike(1, 1, false, 13), 90),
	}
	for _, name := range []string{"sub420.jpg", "sub422.jpg", "sub444.jpg", "sub440.jpg", "progressive.jpg"} {
		files[name] = fixture(t, name)
	}
	for name, data := range files {
		for _, d := range ScaleDenoms {
			t.Run(fmt.Sprintf("%s 1/%d", name, d), func(t *testing.T) {
				hd, err := DecodeHeader(data)
				if err != nil {
					t.Fatal(err)
				}
				w, h := ScaledSize(hd.W, hd.H, d)
				rw, rh, want := djpegScaled(t, data, d)
				if rw != w || rh != h {
					t.Fatalf("djpeg gives %dx%d, ScaledSize %dx%d", rw, rh, w, h)
				}
				stride := w*3 + 5
				pix := poisoned(h * stride)
				if err := DecodeScaled(data, pix, d, w, h, stride, PixelRGB); err != nil {
					t.Fatal(err)
				}
				for y := range h {
					if got := pix[y*stride:][:w*3]; !bytes.Equal(got, want[y*w*3:][:w*3]) {
						t.Fatalf("row %d differs from djpeg's", y)
					}
					if !bytes.Equal(pix[y*stride+w*3:][:5], poisoned(5)) {
						t.Fatalf("padding after row %d written", y)
					}
				}
			})
		}
	}
}

// TestDecodeScaledIsBlockMean checks what 1/8 means, independently of
// libjpeg: each pixel is about the mean of its 8×8 block of the full
// decode (the DC coefficient), on a smooth picture.
func TestDecodeScaledIsBlockMean(t *testing.T) {
	requireLib(t)
	const W, H = 128, 96
	data := encode(t, photoLike(W, H, false, 14), 95)
	full := make([]byte, W*H*3)
	if err := Decode(data, full, W, H, W*3, PixelRGB); err != nil {
		t.Fatal(err)
	}
	small := make([]byte, W/8*H/8*3)
	if err := DecodeScaled(data, small, 8, W/8, H/8, W/8*3, PixelRGB); err != nil {
		t.Fatal(err)
	}
	var worst int
	for by := range H / 8 {
		for bx := range W / 8 {
			for c := range 3 {
				sum := 0
				for y := by * 8; y < by*8+8; y++ {
					for x := bx * 8; x < bx*8+8; x++ {
						sum += int(full[(y*W+x)*3+c])
					}
				}
				diff := int(small[(by*W/8+bx)*3+c]) - (sum+32)/64
				worst = max(worst, diff, -diff)
			}
		}
	}
	// Chroma is subsampled 4:2:0 and upsampled differently at each scale;
	// a few levels of difference are expected, a wrong scale gives dozens.
	if worst > 6 {
		t.Errorf("1/8 decode is up to %d levels from the 8×8 block means", worst)
	}
}

func TestDecodeScaledErrors(t *testing.T) {
	requireLib(t)
	data := encode(t, photoLike(20, 10, false, 6), 90)
	for _, tc := range []struct {
		name        string
		denom, w, h int
		want        string
	}{
		{"scale 1/3", 3, 7, 4, "scale 1/3 is not one of"},
		{"scale 1/16", 16, 2, 1, "scale 1/16 is not one of"},
		{"full size at 1/2", 2, 20, 10, "JPEG is 20x10, 10x5 at 1/2, not 20x10"},
		{"rounded down at 1/8", 8, 2, 1, "3x2 at 1/8, not 2x1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := tc.w * tc.h * 3
			pix := poisoned(n)
			err := DecodeScaled(data, pix, tc.denom, tc.w, tc.h, tc.w*3, PixelRGB)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
			if !bytes.Equal(pix, poisoned(n)) {
				t.Fatal("the buffer was written")
			}
		})
	}
}
