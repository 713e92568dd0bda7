package progressive

import (
	"bytes"
	"errors"
	"testing"

	"github.com/imgpipe/imgpipe/stages/jpegmarker"
	"github.com/imgpipe/imgpipe/stages/jpegturbo"
)

// segments splits a JPEG into SOI, its marker segments (each SOS with its entropy-coded
// data) and EOI.
func segments(t testing.TB, data []byte) [][]byte {
	t.Helper()
	out, last := [][]byte{data[:2]}, 2
	if !jpegmarker.Segments(data, func(_ byte, _ []byte, at, end int) bool {
		out, last = append(out, data[at:end]), end
		return true
	}) {
		t.Fatal("no EOI")
	}
	return append(out, data[last:last+2])
}

// join puts segments back together, each copied.
func join(segs ...[]byte) []byte {
	var out []byte
	for _, s := range segs {
		out = append(out, s...)
	}
	return out
}

// Files that libjpeg-turbo would refuse, warn about, or smooth, and files of another kind,
// are not rewritten: the caller decodes them itself.
func TestSequentialRefuses(t *testing.T) {
	p420 := fixture(t, "progressive/p420.jpg")
	segs := segments(t, p420)
	var sos []int // indexes of the scans in segs
	for i, s := range segs {
		if s[1] == 0xda {
			sos = append(sos, i)
		}
	}
	last := sos[len(sos)-1]
	with := func(i int, seg []byte) []byte {
		s := append([][]byte{}, segs...)
		s[i] = seg
		return join(s...)
	}
	edit := func(i, at int, b byte) []byte {
		seg := bytes.Clone(segs[i])
		seg[at] = b
		return with(i, seg)
	}
	sof := 0
	for i, s := range segs {
		if s[1] == 0xc2 {
			sof = i
		}
	}
	dqt := 0
	for i, s := range segs {
		if s[1] == 0xdb {
			dqt = i
		}
	}
	restart := fixture(t, "progressive/restart.jpg")
	rst1 := bytes.Index(restart, []byte{0xff, 0xd1})
	tests := []struct {
		name string
		data []byte
		want string
	}{
		{"baseline", fixture(t, "sub420.jpg"), "marker FFC0"},
		{"arithmetic-coded", fixture(t, "arith/arith_progressive.jpg"), "marker FFCA"},
		{"not a JPEG", []byte("GIF89a..."), "no SOI"},
		{"12-bit", edit(sof, 4, 12), "12-bit"},
		{"4 components", edit(sof, 9, 4), "components"},
		{"sampling factor 0", edit(sof, 11, 0x01), "sampling"},
		{"no EOI", p420[:len(p420)-2], "does not end"},
		{"cut in a scan", join(append(segs[:sos[2]:sos[2]], segs[sos[2]][:40], []byte{0xff, 0xd9})...), "without a warning"},
		{"a byte more in a scan", with(sos[2], append(bytes.Clone(segs[sos[2]]), 0x00)), "without a warning"},
		{"last refinement left out", join(append(segs[:last:last], segs[last+1:]...)...), "not complete"},
		{"a refinement before its first scan", join(append(append(segs[:sos[1]:sos[1]], segs[last]), segs[sos[1]:]...)...), "bogus progression"},
		{"a quantisation table after a scan", join(append(append(segs[:sos[1]:sos[1]], segs[dqt]), segs[sos[1]:]...)...), "quantisation table"},
		{"a second frame header", join(append(append(segs[:sos[0]:sos[0]], segs[sof]), segs[sos[0]:]...)...), "second frame"},
		{"unknown component", edit(sos[1], 5, 9), "lacks"},
		{"AC scan of two components", edit(sos[1], 4, 2), "SOS segment"},
		{"Al 14", edit(sos[1], 9, 0x0e), "band"},
		{"undefined Huffman table", edit(sos[1], 6, 0x03), "no AC Huffman table 3"},
		{"restart marker out of turn", append(append(bytes.Clone(restart[:rst1]), 0xff, 0xd2), restart[rst1+2:]...), "does not end"},
		{"SOI twice", join(append([][]byte{segs[0]}, segs...)...), "marker FFD8"},
		{"junk between segments", join(append(append(segs[:sof:sof], []byte{0x00}), segs[sof:]...)...), "no marker"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dst := []byte("kept")
			out, err := Sequential(dst, tt.data, 1)
			if !errors.Is(err, ErrUnsupported) || !bytes.Contains([]byte(err.Error()), []byte(tt.want)) {
				t.Fatalf("error %v, want ErrUnsupported with %q", err, tt.want)
			}
			if string(out) != "kept" {
				t.Errorf("dst became %q", out)
			}
		})
	}
}

// FuzzSequential: on any bytes Sequential returns an error, or a sequential JPEG that
// libjpeg-turbo decodes to the bytes it decodes the input to, at full size (every scan read)
// and at 1/4 and 1/8 (some coefficients written as zeros, some scans passed over), whenever
// it decodes the input at that scale without an error.
func FuzzSequential(f *testing.F) {
	for _, name := range []string{"progressive/p420.jpg", "progressive/gray.jpg", "progressive/restart.jpg", "progressive.jpg"} {
		f.Add(fixture(f, name))
	}
	turbo := jpegturbo.Available() == nil
	f.Fuzz(func(t *testing.T, data []byte) {
		if _, w, h := frameHeader(data); w*h > 1<<20 {
			return // the size is bounded by Sequential's caller (decode's max_pixels)
		}
		for _, denom := range []int{1, 4, 8} {
			out, err := Sequential(nil, data, denom)
			if err != nil {
				if !errors.Is(err, ErrUnsupported) {
					t.Fatalf("error %v does not wrap ErrUnsupported", err)
				}
				return
			}
			if !turbo {
				return
			}
			hd, err := jpegturbo.DecodeHeader(data)
			if err != nil {
				return
			}
			w, h := jpegturbo.ScaledSize(hd.W, hd.H, denom)
			want := make([]byte, w*h*3)
			if jpegturbo.DecodeScaled(data, want, denom, w, h, w*3, jpegturbo.PixelRGB) != nil {
				continue
			}
			got := make([]byte, len(want))
			if err := jpegturbo.DecodeScaled(out, got, denom, w, h, w*3, jpegturbo.PixelRGB); err != nil {
				t.Fatalf("at 1/%d the input decodes, its sequential version does not: %v", denom, err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("at 1/%d the sequential version decodes to other bytes", denom)
			}
		}
	})
}
