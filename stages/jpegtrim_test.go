package stages

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/imgpipe/imgpipe/stages/jpegturbo"
)

// decodeEighth decodes data with libjpeg-turbo as decodeTurbo asks it to at scale 1/8.
func decodeEighth(t testing.TB, data []byte) []byte {
	t.Helper()
	hd, err := jpegturbo.DecodeHeader(data)
	if err != nil {
		t.Fatal(err)
	}
	w, h := jpegturbo.ScaledSize(hd.W, hd.H, 8)
	pix := make([]byte, w*h*3)
	if err := jpegturbo.DecodeScaled(data, pix, 8, w, h, w*3, jpegturbo.PixelRGB); err != nil {
		t.Fatal(err)
	}
	return pix
}

// A progressive JPEG without the scans trimProgressive leaves out decodes at 1/8 to the
// whole file's bytes, for every subsampling and scan script of the fixtures (and the photos
// of IMGPIPE_TEST_PHOTOS, when set); what it leaves out is what the rule says.
func TestTrimProgressive(t *testing.T) {
	if err := jpegturbo.Available(); err != nil {
		t.Skipf("libjpeg-turbo: %v", err)
	}
	tests := []struct {
		file string
		kept int // scans kept of all, -1: data itself
	}{
		// cjpeg's script: the luma's DC scans and first AC scan (1-5), every chroma scan.
		{"progressive/p420.jpg", 7},
		// 4:2:2 and 4:4:4: every component's blocks become one pixel: DC scans, and each
		// component's first AC scan.
		{"progressive/p422.jpg", 5},
		{"progressive/p444.jpg", 5},
		{"progressive/gray.jpg", 3},
		{"progressive/restart.jpg", 7},
		// One AC scan a component: each one is the first, nothing to leave out.
		{"progressive/spectral.jpg", -1},
		// The luma's first AC scan covers 10-63, none of 1-9: the next one (1-9) is kept.
		{"progressive/late.jpg", 5},
		// 2x3 decodes at 1/4, where no block becomes one pixel.
		{"progressive/tiny.jpg", -1},
		{"progressive.jpg", 7},
		{"progressive_gray.jpg", 3},
		{"sub420.jpg", -1},                  // baseline
		{"arith/arith_progressive.jpg", -1}, // arithmetic-coded
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join("testdata", tt.file))
			if err != nil {
				t.Fatal(err)
			}
			trimmed := trimProgressive(data, 8)
			switch {
			case tt.kept < 0 && &trimmed[0] != &data[0]:
				t.Fatalf("trimmed to %d of %d bytes, want data itself", len(trimmed), len(data))
			case tt.kept >= 0 && walkJPEG(trimmed, func(*jpegFrame) bool { return false }).scans != tt.kept:
				t.Fatalf("%d scans kept, want %d", walkJPEG(trimmed, func(*jpegFrame) bool { return false }).scans, tt.kept)
			}
			if tt.file == "arith/arith_progressive.jpg" {
				return // TurboJPEG may be built without arithmetic decoding
			}
			if !bytes.Equal(decodeEighth(t, trimmed), decodeEighth(t, data)) {
				t.Errorf("at 1/8 the trimmed file (%d of %d bytes) decodes to other bytes", len(trimmed), len(data))
			}
			// At 1/4 and larger every coefficient counts: nothing is left out.
			for _, denom := range []int{1, 2, 4} {
				if out := trimProgressive(data, denom); &out[0] != &data[0] {
					t.Errorf("at 1/%d trimmed to %d of %d bytes", denom, len(out), len(data))
				}
			}
		})
	}
	dir := os.Getenv("IMGPIPE_TEST_PHOTOS")
	if dir == "" {
		return
	}
	photos, _ := filepath.Glob(filepath.Join(dir, "*", "*.jpg"))
	more, _ := filepath.Glob(filepath.Join(dir, "*.jpg"))
	for _, f := range append(photos, more...) {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if trimmed := trimProgressive(data, 8); !bytes.Equal(decodeEighth(t, trimmed), decodeEighth(t, data)) {
			t.Errorf("%s: at 1/8 the trimmed file (%d of %d bytes) decodes to other bytes", f, len(trimmed), len(data))
		}
	}
}

// A file whose structure trimProgressive does not follow comes back whole, for the decoder
// to judge.
func TestTrimProgressiveLeavesOddFiles(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "progressive", "p420.jpg"))
	if err != nil {
		t.Fatal(err)
	}
	sof := bytes.Index(data, []byte{0xff, 0xc2})
	sos := bytes.Index(data, []byte{0xff, 0xda})                    // the DC scan of 3 components
	sos2 := bytes.Index(data[sos+2:], []byte{0xff, 0xda}) + sos + 2 // the luma's AC 1-5, Al 2
	withByte := func(at int, b byte) []byte {
		d := bytes.Clone(data)
		d[at] = b
		return d
	}
	tests := []struct {
		name string
		data []byte
	}{
		{"cut in the last scan", data[:len(data)-40]},
		{"no EOI", data[:len(data)-2]},
		{"cut in a marker", data[:sof+3]},
		{"12-bit", withByte(sof+4, 12)},
		{"a sampling factor of 0", withByte(sof+4+7, 0x02)},
		{"a component count that is not the segment's", withByte(sof+4+5, 2)},
		{"a scan of an unknown component", withByte(sos2+5, 9)},
		{"a refinement before its first scan", withByte(sos2+9, 0x21)},
		{"a refinement by two bits", withByte(sos2+9, 0x20)},
		{"an AC scan of three components", withByte(sos+4+7, 1)},
		{"a component twice in a scan", withByte(sos+4+3, data[sos+4+1])},
		{"a scan header too short", withByte(sos+3, 4)},
		{"junk between segments", withByte(sof, 0x00)},
		{"a restart marker between segments", withByte(sof+1, 0xd0)},
		{"not a JPEG", []byte("not a JPEG at all")},
	}
	for _, tt := range tests {
		if out := trimProgressive(tt.data, 8); &out[0] != &tt.data[0] || len(out) != len(tt.data) {
			t.Errorf("%s: trimmed to %d of %d bytes, want the file itself", tt.name, len(out), len(tt.data))
		}
	}
}

// BenchmarkDecodeEighthProgressive decodes the progressive photos of IMGPIPE_TEST_PHOTOS at
// 1/8, whole and trimmed.
func BenchmarkDecodeEighthProgressive(b *testing.B) {
	dir := os.Getenv("IMGPIPE_TEST_PHOTOS")
	if dir == "" || jpegturbo.Available() != nil {
		b.Skip("needs IMGPIPE_TEST_PHOTOS and libjpeg-turbo")
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*", "*.jpg"))
	var progressive [][]byte
	for _, f := range files {
		if data, err := os.ReadFile(f); err == nil && JPEGProgressive(data) {
			progressive = append(progressive, data)
		}
	}
	if len(progressive) == 0 {
		b.Skip("no progressive JPEG in IMGPIPE_TEST_PHOTOS")
	}
	for _, trim := range []bool{false, true} {
		b.Run(map[bool]string{false: "whole", true: "trimmed"}[trim], func(b *testing.B) {
			for b.Loop() {
				for _, data := range progressive {
					if trim {
						data = trimProgressive(data, 8)
					}
					decodeEighth(b, data)
				}
			}
		})
	}
}

// FuzzTrimProgressive: on any bytes trimProgressive returns the file itself or a shorter JPEG
// made of the file's own segments, and a file it trims comes back the same when trimmed
// again. (That the pixels are the whole file's is TestTrimProgressive's: on damaged files
// libjpeg-turbo's own output is a guess, and it reports only a file's first warning.)
func FuzzTrimProgressive(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "progressive", "*.jpg"))
	for _, file := range append(files, filepath.Join("testdata", "progressive.jpg")) {
		data, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		out := trimProgressive(data, 8)
		if len(out) == len(data) {
			if len(data) > 0 && &out[0] != &data[0] {
				t.Fatal("a copy of the whole file")
			}
			return
		}
		if len(out) > len(data) || !bytes.Equal(out[:2], data[:2]) || !bytes.HasSuffix(out, []byte{0xff, 0xd9}) || !isSubsequence(out, data) {
			t.Fatalf("trimmed %d bytes to %d that are not a subset of its segments", len(data), len(out))
		}
		if again := trimProgressive(out, 8); len(again) != len(out) {
			t.Fatalf("trimmed again: %d bytes to %d", len(out), len(again))
		}
	})
}

// isSubsequence reports whether a's bytes appear in b in order.
func isSubsequence(a, b []byte) bool {
	for _, c := range a {
		i := bytes.IndexByte(b, c)
		if i < 0 {
			return false
		}
		b = b[i+1:]
	}
	return true
}
