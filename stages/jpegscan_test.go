package stages

import (
	"bytes"
	"encoding/binary"
	"errors"
	"image/jpeg"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// scanBomb builds a valid progressive gray JPEG of w×h whose DC scan is followed by
// scans AC scans, each coding all its blocks as one end-of-band run: a few bytes a scan,
// each of which Go's decoder pays with a pass over every block.
func scanBomb(w, h, scans int) []byte {
	var b bytes.Buffer
	seg := func(marker byte, payload ...byte) {
		b.Write([]byte{0xff, marker})
		binary.Write(&b, binary.BigEndian, uint16(len(payload)+2))
		b.Write(payload)
	}
	b.Write([]byte{0xff, 0xd8})
	dqt := append([]byte{0}, bytes.Repeat([]byte{1}, 64)...)
	seg(0xdb, dqt...)
	seg(0xc2, 8, byte(h>>8), byte(h), byte(w>>8), byte(w), 1, 1, 0x11, 0)
	counts := make([]byte, 16)
	counts[0] = 1
	seg(0xc4, append(append([]byte{0x00}, counts...), 0x00)...) // DC: category 0 is "0"
	seg(0xc4, append(append([]byte{0x10}, counts...), 0xe0)...) // AC: EOB run 2^14.. is "0"
	blocks := ((w + 7) / 8) * ((h + 7) / 8)
	bits := func(n int) { // n zero bits, padded with ones to a byte
		b.Write(make([]byte, n/8))
		if n%8 != 0 {
			b.WriteByte(0xff >> (n % 8))
		}
	}
	seg(0xda, 1, 1, 0x00, 0, 0, 0x00)
	bits(blocks)
	for i := 0; i < scans; i++ {
		seg(0xda, 1, 1, 0x00, 1, 63, 0x00)
		runs := (blocks + 1<<14 - 1) >> 14
		bits(runs * 15) // symbol "0" and 14 zero bits: a run of 2^14 blocks each
	}
	b.Write([]byte{0xff, 0xd9})
	return b.Bytes()
}

// A JPEG scan bomb is refused before decoding, on every backend, within a fraction of the
// time Go's decoder would take on it; ordinary progressive files still decode.
func TestJPEGScanBomb(t *testing.T) {
	tests := []struct {
		name        string
		w, h, scans int
		wantErr     bool
	}{
		{"few scans", 256, 256, 9, false},
		{"scan limit", 64, 64, MaxJPEGScans + 1, true},
		{"pass limit", 4096, 4096, MaxJPEGPasses + 1, true},
		{"bomb", 8192, 8192, 1300, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data := scanBomb(tt.w, tt.h, tt.scans)
			if !tt.wantErr {
				// The generator makes files Go's decoder takes.
				if _, err := jpeg.Decode(bytes.NewReader(data)); err != nil {
					t.Fatalf("generated file does not decode: %v", err)
				}
			}
			// CheckFile (a GPU run's check before a file goes to the device's decoder,
			// which has no limits of its own) refuses the same.
			if _, err := CheckFile(data, DecodeOptions{}); errors.Is(err, ErrTooMuchWork) != tt.wantErr {
				t.Fatalf("CheckFile: err %v, want refusal %v", err, tt.wantErr)
			}
			for _, be := range []JPEGBackend{JPEGGo, JPEGTurbo} {
				if be == JPEGTurbo && be.Check() != nil {
					continue
				}
				t0 := time.Now()
				_, err := Decode(data, DecodeOptions{JPEG: be}, nil)
				took := time.Since(t0)
				if got := errors.Is(err, ErrTooMuchWork); got != tt.wantErr {
					t.Fatalf("%s: err %v, want refusal %v", be, err, tt.wantErr)
				}
				// A bound, not a timing: the refusal is a walk over a few kilobytes,
				// while decoding the 8192² bomb takes Go tens of seconds.
				if tt.wantErr && took > 2*time.Second {
					t.Errorf("%s: refusal took %v", be, took)
				}
			}
		})
	}
}

func TestJPEGComponents(t *testing.T) {
	for _, tc := range []struct {
		file string // in testdata; "" for data
		data []byte
		want int
	}{
		{file: "sub420.jpg", want: 3},
		{file: "progressive_gray.jpg", want: 1},
		{file: "cmyk.jpg", want: 4},
		{file: "arith/arith420.jpg", want: 3},
		{data: []byte{0xff, 0xd8}, want: 0},
		{data: []byte("not a jpeg"), want: 0},
	} {
		data := tc.data
		if tc.file != "" {
			var err error
			if data, err = os.ReadFile(filepath.Join("testdata", tc.file)); err != nil {
				t.Fatal(err)
			}
		}
		if got := JPEGComponents(data); got != tc.want {
			t.Errorf("%s % x: %d components, want %d", tc.file, data[:min(4, len(data))], got, tc.want)
		}
	}
}
