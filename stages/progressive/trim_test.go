package progressive

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/imgpipe/imgpipe/stages/jpegmarker"
	"github.com/imgpipe/imgpipe/stages/jpegturbo"
)

// A progressive JPEG without the scans Trim leaves out decodes at 1/8 to the
// whole file's bytes, for every subsampling and scan script of the fixtures (and the photos
// of IMGPIPE_TEST_PHOTOS, when set); what it leaves out is what the rule says.
func TestTrim(t *testing.T) {
	if err := jpegturbo.Available(); err != nil {
		t.Skipf("libjpeg-turbo: %v", err)
	}
	tests := []struct {
		file string
		kept int // scans kept of all, -1: data itself
		zero int // of them, zeroACScan's
	}{
		// cjpeg's script: the luma's DC scans and first AC scan (1-5, a zero scan in its
		// place), every chroma scan.
		{"progressive/p420.jpg", 7, 1},
		// 4:2:2 and 4:4:4: every component's blocks become one pixel: DC scans, and each
		// component's first AC scan, as a zero scan.
		{"progressive/p422.jpg", 5, 3},
		{"progressive/p444.jpg", 5, 3},
		{"progressive/gray.jpg", 3, 1},
		// A restart interval: the first AC scan itself.
		{"progressive/restart.jpg", 7, 0},
		// One AC scan a component: each one is the first, and a zero scan replaces it.
		{"progressive/spectral.jpg", 4, 3},
		// The luma's first AC scan covers 10-63, none of 1-9: the next one (1-9) counts.
		{"progressive/late.jpg", 5, 3},
		// 2x3 decodes at 1/4, where no block becomes one pixel.
		{"progressive/tiny.jpg", -1, 0},
		{"progressive.jpg", 7, 1},
		{"progressive_gray.jpg", 3, 1},
		{"sub420.jpg", -1, 0},                  // baseline
		{"arith/arith_progressive.jpg", -1, 0}, // arithmetic-coded
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join("..", "testdata", tt.file))
			if err != nil {
				t.Fatal(err)
			}
			trimmed := Trim(data, 8)
			switch {
			case tt.kept < 0 && &trimmed[0] != &data[0]:
				t.Fatalf("trimmed to %d of %d bytes, want data itself", len(trimmed), len(data))
			}
			if kept, zero := scanCounts(trimmed); tt.kept >= 0 && (kept != tt.kept || zero != tt.zero) {
				t.Fatalf("%d scans kept, %d of them zero scans; want %d and %d", kept, zero, tt.kept, tt.zero)
			}
			if tt.file == "arith/arith_progressive.jpg" {
				return // TurboJPEG may be built without arithmetic decoding
			}
			if !bytes.Equal(decode(t, trimmed, 8), decode(t, data, 8)) {
				t.Errorf("at 1/8 the trimmed file (%d of %d bytes) decodes to other bytes", len(trimmed), len(data))
			}
			// At 1/4 and larger every coefficient counts: nothing is left out.
			for _, denom := range []int{1, 2, 4} {
				if out := Trim(data, denom); &out[0] != &data[0] {
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
		if trimmed := Trim(data, 8); !bytes.Equal(decode(t, trimmed, 8), decode(t, data, 8)) {
			t.Errorf("%s: at 1/8 the trimmed file (%d of %d bytes) decodes to other bytes", f, len(trimmed), len(data))
		}
	}
}

// scanCounts counts the scans of a JPEG, and those that are zeroACScan's (Ss = Se = 1, Al = 13).
func scanCounts(data []byte) (scans, zero int) {
	jpegmarker.Segments(data, func(m byte, seg []byte, _, _ int) bool {
		if m == 0xda {
			scans++
			if len(seg) == 6 && seg[3] == 1 && seg[4] == 1 && seg[5] == 13 {
				zero++
			}
		}
		return true
	})
	return scans, zero
}

// zeroACScan's EOB runs cover every block of its component exactly, across the largest run
// (32,767 blocks), with its bytes stuffed and its last byte padded with 1 bits.
func TestZeroACScan(t *testing.T) {
	for _, blocks := range []int{1, 2, 3, 16, 255, 32767, 32768, 65535, 65536, 187500} {
		scan := zeroACScan(7, blocks, 2)
		head := []byte{0xff, 0xc4, 0, 34, 0x12}
		if !bytes.HasPrefix(scan, head) || !bytes.Contains(scan, []byte{0xff, 0xda, 0, 8, 1, 7, 2, 1, 1, 13}) {
			t.Fatalf("%d blocks: table or scan header wrong: % x", blocks, scan[:min(len(scan), 60)])
		}
		data := scan[bytes.Index(scan, []byte{0xff, 0xda})+10:]
		var unstuffed, bits []byte // bits: a bit a byte
		for i := 0; i < len(data); i++ {
			unstuffed = append(unstuffed, data[i])
			if data[i] == 0xff {
				if i+1 == len(data) || data[i+1] != 0 {
					t.Fatalf("%d blocks: 0xFF not stuffed", blocks)
				}
				i++
			}
		}
		for _, c := range unstuffed {
			for k := 7; k >= 0; k-- {
				bits = append(bits, c>>k&1)
			}
		}
		read := func(n int) int {
			v := 0
			for range n {
				v, bits = v<<1|int(bits[0]), bits[1:]
			}
			return v
		}
		covered := 0
		for covered < blocks {
			if len(bits) < 4 {
				t.Fatalf("%d blocks: the runs end at %d", blocks, covered)
			}
			r := read(4)
			if r > 14 || len(bits) < r {
				t.Fatalf("%d blocks: code %d at block %d", blocks, r, covered)
			}
			covered += 1<<r + read(r)
		}
		if covered != blocks || len(bits) >= 8 || bytes.ContainsRune(bits, 0) {
			t.Errorf("%d blocks: runs cover %d, then %d bits %v", blocks, covered, len(bits), bits)
		}
	}
}

// A zero scan needs an AC Huffman table slot that no AC scan of the file uses; without one
// the first AC scan itself is kept.
func TestTrimNoFreeTable(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "testdata", "progressive", "p420.jpg"))
	if err != nil {
		t.Fatal(err)
	}
	if got := freeACTable(data); got != 2 {
		t.Fatalf("free AC table %d, want 2 (cjpeg uses 0 and 1)", got)
	}
	// Point four AC scans at tables 0 to 3 (the decoder would refuse the file; the rule only
	// looks at the selectors).
	d := bytes.Clone(data)
	ac := 0
	jpegmarker.Segments(d, func(m byte, seg []byte, at, _ int) bool {
		if m == 0xda && seg[0] == 1 && seg[3] > 0 && ac < 4 {
			d[at+6] = byte(ac)
			ac++
		}
		return true
	})
	if got := freeACTable(d); got != -1 {
		t.Fatalf("free AC table %d, want none", got)
	}
	if kept, zero := scanCounts(Trim(d, 8)); kept != 7 || zero != 0 {
		t.Errorf("%d scans kept, %d of them zero scans; want 7 and none", kept, zero)
	}
}

// A file whose structure Trim does not follow comes back whole, for the decoder
// to judge.
func TestTrimLeavesOddFiles(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "testdata", "progressive", "p420.jpg"))
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
	// Without its last scan, a refinement, some coefficients miss their last bit.
	short := append(bytes.Clone(data[:bytes.LastIndex(data, []byte{0xff, 0xda})]), 0xff, 0xd9)
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
		{"a coefficient short of its last bit", short},
	}
	for _, tt := range tests {
		if out := Trim(tt.data, 8); &out[0] != &tt.data[0] || len(out) != len(tt.data) {
			t.Errorf("%s: trimmed to %d of %d bytes, want the file itself", tt.name, len(out), len(tt.data))
		}
	}
}

// BenchmarkDecodeEighthProgressive decodes the progressive photos of IMGPIPE_TEST_PHOTOS at
// 1/8: whole, trimmed, and rewritten as sequential files (the rewrite included), which is
// how stages decodes them at 1/8.
func BenchmarkDecodeEighthProgressive(b *testing.B) {
	dir := os.Getenv("IMGPIPE_TEST_PHOTOS")
	if dir == "" || jpegturbo.Available() != nil {
		b.Skip("needs IMGPIPE_TEST_PHOTOS and libjpeg-turbo")
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*", "*.jpg"))
	var progressive [][]byte
	for _, f := range files {
		if data, err := os.ReadFile(f); err == nil && progressiveFrame(data) {
			progressive = append(progressive, data)
		}
	}
	if len(progressive) == 0 {
		b.Skip("no progressive JPEG in IMGPIPE_TEST_PHOTOS")
	}
	var seq []byte
	for _, tc := range []struct {
		name string
		read func([]byte) []byte // what libjpeg-turbo decodes
	}{
		{"whole", func(data []byte) []byte { return data }},
		{"trimmed", func(data []byte) []byte { return Trim(data, 8) }},
		{"sequential", func(data []byte) []byte {
			var err error
			if seq, err = Sequential(seq[:0], data, 8); err != nil {
				b.Fatal(err)
			}
			return seq
		}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			for b.Loop() {
				for _, data := range progressive {
					decode(b, tc.read(data), 8)
				}
			}
		})
	}
}

// FuzzTrim: on any bytes Trim returns the file itself, or a shorter JPEG
// whose scans form a progression libjpeg-turbo accepts, and which trimming again leaves as it
// is. (That the pixels are the whole file's is TestTrim's: on damaged files
// libjpeg-turbo's own output is a guess, and it reports only a file's first warning.)
func FuzzTrim(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("..", "testdata", "progressive", "*.jpg"))
	for _, file := range append(files, filepath.Join("..", "testdata", "progressive.jpg")) {
		data, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		out := Trim(data, 8)
		if len(out) == len(data) {
			if len(data) > 0 && &out[0] != &data[0] {
				t.Fatal("a copy of the whole file")
			}
			return
		}
		if len(out) > len(data) || !bytes.Equal(out[:2], data[:2]) || !validProgression(out) {
			t.Fatalf("trimmed %d bytes to %d that are not a progressive JPEG libjpeg-turbo accepts", len(data), len(out))
		}
		if again := Trim(out, 8); len(again) != len(out) {
			t.Fatalf("trimmed again: %d bytes to %d", len(out), len(again))
		}
	})
}

// validProgression reports whether data is a progressive JPEG up to EOI whose scans pass
// frame.readScan.
func validProgression(data []byte) bool {
	var f frame
	var s scan
	ok := true
	eoi := jpegmarker.Segments(data, func(m byte, seg []byte, _, _ int) bool {
		switch {
		case m == 0xc2:
			ok = len(f.comps) == 0 && f.read(seg, 8) == nil
		case m == 0xda:
			ok = len(f.comps) > 0 && f.readScan(seg, &s) == nil
		}
		return ok
	})
	return eoi && ok
}
