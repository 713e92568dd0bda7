package stages

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"testing"
)

// streamCases are every fixture and generated case of a streamed format.
func streamCases(t testing.TB) map[string][]byte {
	out := map[string][]byte{}
	extra := map[string][]byte{"tiff with its IFD first": tiffIFDFirst(300, 200)}
	for _, set := range []map[string][]byte{fixtures(t), decodeCases(t), extra} {
		for name, data := range set {
			if Streamed(Sniff(data)) {
				out[name] = data
			}
		}
	}
	return out
}

// tiffIFDEnd is where the IFD of tiffIFDFirst ends and its pixels start.
const tiffIFDEnd = 8 + 2 + 8*12 + 4

// tiffIFDFirst is an uncompressed 8-bit gray TIFF whose IFD comes before its pixels (Go's
// encoder, like libtiff's default, writes it after them), so its header lies in a head of
// tiffIFDEnd bytes and its pixels are read from the file.
func tiffIFDFirst(w, h int) []byte {
	le := binary.LittleEndian
	b := le.AppendUint32([]byte("II*\x00"), 8)
	b = le.AppendUint16(b, 8)
	for _, e := range [][2]uint32{{256, uint32(w)}, {257, uint32(h)}, {258, 8}, {259, 1}, {262, 1}, {273, tiffIFDEnd}, {278, uint32(h)}, {279, uint32(w * h)}} {
		b = le.AppendUint16(b, uint16(e[0]))
		b = le.AppendUint16(b, 4) // LONG
		b = le.AppendUint32(b, 1)
		b = le.AppendUint32(b, e[1])
	}
	b = le.AppendUint32(b, 0) // no next IFD
	for i := 0; i < w*h; i++ {
		b = append(b, byte(i*7))
	}
	return b
}

// A streamed decode gives Decode's bytes for every format it takes, whatever part of the
// file the head holds (as long as it holds the header).
func TestDecodeStreamMatchesDecode(t *testing.T) {
	cases := streamCases(t)
	for _, f := range []string{"png", "gif", "bmp", "tiff", "webp"} {
		found := false
		for _, data := range cases {
			found = found || Sniff(data) == f
		}
		if !found {
			t.Errorf("no %s case", f)
		}
	}
	for name, data := range cases {
		want, err := Decode(data, DecodeOptions{}, nil)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for _, headLen := range []int{len(data), len(data) / 2, 64} {
			if _, err := DecodeHeader(data[:headLen], DecodeOptions{}); err != nil {
				continue // the header lies beyond this head: the caller reads the file whole
			}
			got, err := DecodeStream(data[:headLen], bytes.NewReader(data), int64(len(data)), DecodeOptions{}, nil)
			if err != nil {
				t.Errorf("%s, head %d: %v", name, headLen, err)
				continue
			}
			if !bytes.Equal(got.Pix, want.Pix) || got.W != want.W || got.H != want.H {
				t.Errorf("%s, head %d: pixels differ from Decode's", name, headLen)
			}
		}
	}
}

// failingReaderAt returns err for every read.
type failingReaderAt struct{ err error }

func (f failingReaderAt) ReadAt([]byte, int64) (int, error) { return 0, f.err }

func TestDecodeStreamErrors(t *testing.T) {
	cases := decodeCases(t)
	png, jpg, tif := cases["png-rgb"], cases["jpeg-420"], tiffIFDFirst(19, 13)
	errRead := errors.New("read failed")
	for _, tc := range []struct {
		name string
		head []byte
		file io.ReaderAt
		size int64
		opt  DecodeOptions
		want error  // matched with errors.Is, if set
		msg  string // contained in the error, if set
	}{
		{"JPEG is not streamed", jpg, bytes.NewReader(jpg), int64(len(jpg)), DecodeOptions{}, nil, "not streamed"},
		{"head longer than the file", png, bytes.NewReader(png), int64(len(png)) - 1, DecodeOptions{}, nil, "longer than"},
		{"empty", nil, bytes.NewReader(nil), 0, DecodeOptions{}, ErrEmpty, ""},
		{"over the pixel limit", png[:64], bytes.NewReader(png), int64(len(png)), DecodeOptions{MaxPixels: 10}, ErrTooLarge, ""},
		{"a read error reaches the caller", png[:64], failingReaderAt{errRead}, int64(len(png)), DecodeOptions{}, errRead, ""},
		{"a TIFF read error reaches the caller", tif[:tiffIFDEnd], failingReaderAt{errRead}, int64(len(tif)), DecodeOptions{}, errRead, ""},
		{"the file ends before its size", png[:64], bytes.NewReader(png[:100]), int64(len(png)), DecodeOptions{}, nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := DecodeStream(tc.head, tc.file, tc.size, tc.opt, nil)
			if err == nil || m != nil {
				t.Fatalf("got %v, %v; want an error", m, err)
			}
			if tc.want != nil && !errors.Is(err, tc.want) {
				t.Errorf("error %v, want %v", err, tc.want)
			}
			if tc.msg != "" && !bytes.Contains([]byte(err.Error()), []byte(tc.msg)) {
				t.Errorf("error %q, want %q in it", err, tc.msg)
			}
		})
	}
}

// The decoder sees the head that was checked, not the file's first bytes, which may have
// changed since (here to a 100 MP header under a 1000-pixel limit).
func TestDecodeStreamReplaysTheHead(t *testing.T) {
	png := decodeCases(t)["png-rgb"]
	changed := setPNGSize(bytes.Clone(png), 10000, 10000)
	m, err := DecodeStream(png[:64], bytes.NewReader(changed), int64(len(png)), DecodeOptions{MaxPixels: 1000}, nil)
	if err != nil || m.W != 19 || m.H != 13 {
		t.Fatalf("got %v, %v; want the 19x13 image the head describes", m, err)
	}
}

func TestStreamed(t *testing.T) {
	for _, f := range formats {
		if got, want := Streamed(f.name), f.name != "jpeg"; got != want {
			t.Errorf("Streamed(%s) = %v", f.name, got)
		}
	}
	if Streamed("") {
		t.Error(`Streamed("")`)
	}
}
