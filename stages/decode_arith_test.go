package stages

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// arithFixtures returns testdata/arith's JPEGs by name: sub420.jpg arithmetic-coded.
func arithFixtures(t testing.TB) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	for _, n := range []string{"arith420.jpg", "arith_progressive.jpg"} {
		b, err := os.ReadFile(filepath.Join("testdata", "arith", n))
		if err != nil {
			t.Fatal(err)
		}
		out[n] = b
	}
	return out
}

// withSOF returns data with its frame header's marker replaced by m.
func withSOF(t *testing.T, data []byte, m byte) []byte {
	t.Helper()
	i := bytes.Index(data, []byte{0xff, 0xc0})
	if i < 0 {
		t.Fatal("no SOF0 in the fixture")
	}
	out := bytes.Clone(data)
	out[i+1] = m
	return out
}

// TestDecodeArithmetic: Go's decoder does not read arithmetic-coded JPEGs, libjpeg-turbo
// does. With turbo (and auto, where it loads) they decode to the pixels of the
// Huffman-coded file with the same coefficients, at full size and scaled, and the pixel
// limit still holds; with go the error names the coding and the backend that reads it.
func TestDecodeArithmetic(t *testing.T) {
	huff := fixtures(t)["sub420.jpg"]
	for name, data := range arithFixtures(t) {
		t.Run(name, func(t *testing.T) {
			if got := JPEGCoding(data); got != "arithmetic-coded" {
				t.Errorf("JPEGCoding = %q, want arithmetic-coded", got)
			}
			_, err := Decode(data, DecodeOptions{JPEG: JPEGGo}, nil)
			if err == nil || !strings.Contains(err.Error(), "arithmetic-coded JPEG: Go's decoder cannot read it") ||
				!strings.Contains(err.Error(), "backend=turbo") {
				t.Errorf("backend=go: error %v, want one naming the coding and backend=turbo", err)
			}
			requireTurbo(t)
			for _, b := range []JPEGBackend{JPEGTurbo, JPEGAuto} {
				for _, denom := range []int{1, 2} {
					opt := DecodeOptions{JPEG: b, Scale: func(int, int) int { return denom }}
					want, err := Decode(huff, opt, nil)
					if err != nil {
						t.Fatal(err)
					}
					got, by, err := DecodeBy(data, opt, nil)
					if err != nil {
						t.Fatalf("backend=%s scale 1/%d: %v", b, denom, err)
					}
					if by != (Decoded{JPEGTurbo, denom}) {
						t.Errorf("backend=%s: decoded by %+v", b, by)
					}
					sameImage(t, got, want)
				}
			}
			if _, err := DecodeHeader(data, DecodeOptions{MaxPixels: 23*13 - 1, JPEG: JPEGTurbo}); !errors.Is(err, ErrTooLarge) {
				t.Errorf("over max_pixels: %v, want ErrTooLarge", err)
			}
		})
	}
}

// TestDecodeBeyondGoErrors: a JPEG coding that neither decoder reads (lossless, here a
// SOF3 marker on DCT data; libjpeg-turbo reads lossless JPEGs from 3.0) fails with an
// error that names it, on both backends.
func TestDecodeBeyondGoErrors(t *testing.T) {
	lossless := withSOF(t, fixtures(t)["sub420.jpg"], 0xc3)
	for _, b := range []JPEGBackend{JPEGGo, JPEGTurbo} {
		t.Run(string(b), func(t *testing.T) {
			if b == JPEGTurbo {
				requireTurbo(t)
				if turboReads(lossless) {
					t.Skip("this libjpeg-turbo (3.0 or later) reads lossless JPEGs")
				}
			}
			_, err := Decode(lossless, DecodeOptions{JPEG: b}, nil)
			if err == nil || !strings.HasPrefix(err.Error(), "lossless JPEG: ") {
				t.Fatalf("error %v, want one starting with %q", err, "lossless JPEG: ")
			}
		})
	}
}

func TestJPEGCoding(t *testing.T) {
	sof := func(m byte) []byte { // SOI, then a 1-component 13x23 frame header
		return []byte{0xff, 0xd8, 0xff, m, 0, 11, 8, 0, 13, 0, 23, 1, 1, 0x11, 0}
	}
	for _, c := range []struct {
		data []byte
		want string
	}{
		{sof(0xc0), ""}, {sof(0xc1), ""}, {sof(0xc2), ""},
		{sof(0xc3), "lossless"},
		{sof(0xc5), "hierarchical"}, {sof(0xc6), "hierarchical"}, {sof(0xc7), "hierarchical lossless"},
		{sof(0xc9), "arithmetic-coded"}, {sof(0xca), "arithmetic-coded"}, {sof(0xcb), "lossless arithmetic-coded"},
		{sof(0xcd), "hierarchical arithmetic-coded"}, {sof(0xcf), "hierarchical lossless arithmetic-coded"},
		{[]byte{0xff, 0xd8}, ""}, {[]byte("not a jpeg"), ""},
	} {
		if got := JPEGCoding(c.data); got != c.want {
			t.Errorf("% x: got %q, want %q", c.data[:min(4, len(c.data))], got, c.want)
		}
	}
	for m, want := range map[byte]bool{0xc0: false, 0xc1: false, 0xc2: true, 0xc6: true, 0xc9: false, 0xca: true, 0xce: true} {
		if got := JPEGProgressive(sof(m)); got != want {
			t.Errorf("JPEGProgressive(SOF %#x) = %v, want %v", m, got, want)
		}
	}
}
