package stages

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/imgpipe/imgpipe/stages/jpegturbo"
)

// decodeEighth decodes data with libjpeg-turbo at 1/8, as decodeTurbo asks for it.
func decodeEighth(data []byte, w, h int) ([]byte, error) {
	pix := make([]byte, w*h*3)
	return pix, jpegturbo.DecodeScaled(data, pix, 8, w, h, w*3, jpegturbo.PixelRGB)
}

// TestAtEighth: what atEighth gives libjpeg-turbo decodes at 1/8 to the whole file's bytes;
// it is a sequential file where the rewrite takes the file, the file (trimmed, or as it is)
// where it does not.
func TestAtEighth(t *testing.T) {
	requireTurbo(t)
	read := func(name string) []byte {
		data, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	for _, tc := range []struct {
		name string
		sof  byte // of what atEighth returns
	}{
		{"progressive.jpg", 0xc0},
		{"progressive_gray.jpg", 0xc0},
		{"progressive/p420.jpg", 0xc0},
		{"progressive/p422.jpg", 0xc0},
		{"progressive/p444.jpg", 0xc0},
		{"progressive/gray.jpg", 0xc0},
		{"progressive/restart.jpg", 0xc0},
		{"progressive/spectral.jpg", 0xc0},
		{"progressive/late.jpg", 0xc0},
		{"progressive/tiny.jpg", 0xc0},        // 2×3: libjpeg-turbo applies 1/4
		{"arith/arith_progressive.jpg", 0xca}, // arithmetic coding: the rewrite refuses it
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := read(tc.name)
			hd, err := jpegturbo.DecodeHeader(data)
			if err != nil {
				t.Fatal(err)
			}
			w, h := jpegturbo.ScaledSize(hd.W, hd.H, 8)
			want, err := decodeEighth(data, w, h)
			if err != nil {
				t.Fatal(err)
			}
			file, release := atEighth(data)
			if sof := jpegSOF(file); sof != tc.sof {
				t.Errorf("atEighth gave a file with SOF %#x, want %#x", sof, tc.sof)
			}
			got, err := decodeEighth(file, w, h)
			release()
			if err != nil {
				t.Fatalf("what atEighth gave does not decode: %v", err)
			}
			if !bytes.Equal(got, want) {
				t.Error("at 1/8 it decodes to other bytes than the whole file")
			}
		})
	}
}

// FuzzAtEighth: no bytes crash atEighth, and where it rewrote a file that libjpeg-turbo
// decodes at 1/8 without an error, the rewrite decodes to the same bytes. (What the trimmed
// scans give is TestTrim's: libjpeg-turbo reports only a file's first warning, and takes
// some as harmless, so on a damaged file it may pass over damage in the whole file that it
// reports in the trimmed one, or the other way round.)
func FuzzAtEighth(f *testing.F) {
	for _, name := range []string{"progressive.jpg", "progressive_gray.jpg", "progressive/p420.jpg", "progressive/restart.jpg", "progressive/spectral.jpg"} {
		data, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		requireTurbo(t)
		hd, err := jpegturbo.DecodeHeader(data)
		if err != nil || hd.W*hd.H > 1<<20 || !JPEGProgressive(data) {
			return // decodeTurbo's caller bounds the size; only progressive files get here
		}
		w, h := jpegturbo.ScaledSize(hd.W, hd.H, 8)
		file, release := atEighth(data)
		defer release()
		got, err := decodeEighth(file, w, h)
		want, wholeErr := decodeEighth(data, w, h)
		switch {
		case wholeErr != nil || jpegSOF(file) != 0xc0:
		case err != nil:
			t.Fatalf("the whole file decodes at 1/8, its rewrite does not: %v", err)
		case !bytes.Equal(got, want):
			t.Fatal("the rewrite decodes to other bytes than the whole file")
		}
	})
}
