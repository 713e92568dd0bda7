package stages

import (
	"bytes"
	"compress/zlib"
	"encoding/binary"
	"image"
	"image/color"
	"image/gif"
	"runtime"
	"testing"
)

// tiffDeflate is a w×h 8-bit gray TIFF with one deflate strip that inflates to raw bytes
// of zeros, far more than the w×h the image needs.
func tiffDeflate(t *testing.T, w, h, raw int) []byte {
	t.Helper()
	var z bytes.Buffer
	zw, err := zlib.NewWriterLevel(&z, zlib.BestCompression)
	if err != nil {
		t.Fatal(err)
	}
	zw.Write(make([]byte, raw))
	zw.Close()
	type entry struct {
		tag, typ uint16
		n, v     uint32
	}
	const entries = 9
	dataOff := uint32(8 + 2 + 12*entries + 4)
	var b bytes.Buffer
	b.WriteString("II*\x00")
	binary.Write(&b, binary.LittleEndian, uint32(8))
	binary.Write(&b, binary.LittleEndian, uint16(entries))
	for _, e := range [entries]entry{{256, 4, 1, uint32(w)}, {257, 4, 1, uint32(h)}, {258, 3, 1, 8}, {259, 3, 1, 8},
		{262, 3, 1, 1}, {273, 4, 1, dataOff}, {277, 3, 1, 1}, {278, 4, 1, uint32(h)}, {279, 4, 1, uint32(z.Len())}} {
		binary.Write(&b, binary.LittleEndian, e)
	}
	binary.Write(&b, binary.LittleEndian, uint32(0))
	b.Write(z.Bytes())
	return b.Bytes()
}

// gifFrames is a GIF of n frames of w×h (we take the first).
func gifFrames(t *testing.T, n, w, h int) []byte {
	t.Helper()
	frame := image.NewPaletted(image.Rect(0, 0, w, h), color.Palette{color.Black, color.White})
	g := &gif.GIF{}
	for i := 0; i < n; i++ {
		g.Image = append(g.Image, frame)
		g.Delay = append(g.Delay, 0)
	}
	var b bytes.Buffer
	if err := gif.EncodeAll(&b, g); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// Files built to make a decoder work far beyond their pixels (the other formats' cousins
// of the progressive-JPEG scan bomb) cost what their pixels cost. The bound is on the bytes
// the decode allocates, which, unlike time, does not depend on the machine: a decoder that
// inflated the TIFF's whole strip or decoded every GIF frame would allocate tens of MB.
// (Go's GIF decoder stops after the first frame; x/image/tiff reads a strip only as far as
// the image needs.) Profiled alike and found bounded by the pixel limit: PNG of huge
// dimensions with a tiny IDAT (minEncodedSize, then work in proportion to the pixels).
func TestDecodeWorkBombs(t *testing.T) {
	for _, c := range []struct {
		name     string
		data     []byte
		maxAlloc uint64
	}{
		{"tiff 1x1 with a strip inflating to 64 MB", tiffDeflate(t, 1, 1, 64<<20), 4 << 20},
		{"gif of 2000 frames of 100x100", gifFrames(t, 2000, 100, 100), 4 << 20},
	} {
		t.Run(c.name, func(t *testing.T) {
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			m, err := Decode(c.data, DecodeOptions{}, nil)
			runtime.ReadMemStats(&after)
			if err != nil || m.W*m.H > 100*100 {
				t.Fatalf("decode: %v", err)
			}
			if got := after.TotalAlloc - before.TotalAlloc; got > c.maxAlloc {
				t.Errorf("decoding a %d-byte file allocated %d bytes, bound %d", len(c.data), got, c.maxAlloc)
			}
		})
	}
}
