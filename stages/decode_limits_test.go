package stages

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"io"
	"runtime"
	"strings"
	"testing"
)

// setPNGSize rewrites a PNG's IHDR size and fixes the chunk's CRC.
func setPNGSize(data []byte, w, h uint32) []byte {
	d := bytes.Clone(data)
	binary.BigEndian.PutUint32(d[16:], w)
	binary.BigEndian.PutUint32(d[20:], h)
	binary.BigEndian.PutUint32(d[29:], crc32.ChecksumIEEE(d[12:29]))
	return d
}

// setJPEGSize rewrites the size in a baseline JPEG's SOF0 segment.
func setJPEGSize(t testing.TB, data []byte, w, h uint16) []byte {
	d := bytes.Clone(data)
	i := bytes.Index(d, []byte{0xff, 0xc0})
	if i < 0 {
		t.Fatal("no SOF0")
	}
	binary.BigEndian.PutUint16(d[i+5:], h)
	binary.BigEndian.PutUint16(d[i+7:], w)
	return d
}

// setTIFFSize rewrites ImageWidth and ImageLength in a little-endian TIFF's
// first IFD, as LONG values.
func setTIFFSize(t testing.TB, data []byte, w, h uint32) []byte {
	d := bytes.Clone(data)
	off := binary.LittleEndian.Uint32(d[4:])
	n := int(binary.LittleEndian.Uint16(d[off:]))
	for k := 0; k < n; k++ {
		e := d[int(off)+2+12*k:]
		v := w
		switch binary.LittleEndian.Uint16(e) {
		case 256:
		case 257:
			v = h
		default:
			continue
		}
		binary.LittleEndian.PutUint16(e[2:], 4) // LONG, whatever it was
		binary.LittleEndian.PutUint32(e[8:], v)
	}
	return d
}

func TestDecodeErrors(t *testing.T) {
	cases := decodeCases(t)
	fx := fixtures(t)
	pngData, jpegData := cases["png-rgb"], cases["jpeg-420"]
	gifHuge := bytes.Clone(cases["gif"])
	binary.LittleEndian.PutUint16(gifHuge[6:], 65535)
	binary.LittleEndian.PutUint16(gifHuge[8:], 65535)
	bmpHuge := bytes.Clone(cases["bmp-rgb"])
	binary.LittleEndian.PutUint32(bmpHuge[18:], 50000)
	binary.LittleEndian.PutUint32(bmpHuge[22:], 50000)
	bmpBig := bytes.Clone(cases["bmp-rgb"])
	binary.LittleEndian.PutUint32(bmpBig[18:], 9000)
	binary.LittleEndian.PutUint32(bmpBig[22:], 9000)
	webpHuge := bytes.Clone(fx["lossless.webp"])
	// VP8L: signature 0x2f, then 14 bits width-1 and 14 bits height-1.
	if i := bytes.Index(webpHuge, []byte("VP8L")); i < 0 || webpHuge[i+8] != 0x2f {
		t.Fatal("lossless.webp has no simple VP8L header")
	} else {
		webpHuge[i+9], webpHuge[i+10], webpHuge[i+11] = 0xff, 0xff, 0xff
		webpHuge[i+12] = webpHuge[i+12]&0xf0 | 0x0f
	}

	for _, tc := range []struct {
		name string
		data []byte
		opt  DecodeOptions
		msg  string
		is   error
	}{
		{"zero bytes", nil, DecodeOptions{}, "empty file", ErrEmpty},
		{"text", []byte("hello, this is not an image\n"), DecodeOptions{}, "unknown image format", ErrUnknownFormat},
		{"one byte", []byte{0xff}, DecodeOptions{}, "unknown image format", ErrUnknownFormat},
		{"jpeg magic only", []byte{0xff, 0xd8}, DecodeOptions{}, "unexpected EOF", nil},
		{"truncated jpeg", jpegData[:len(jpegData)/2], DecodeOptions{}, "unexpected EOF", nil},
		// image/png names a cut in the pixel data for what it is.
		{"truncated png", pngData[:len(pngData)/2], DecodeOptions{}, "png: invalid format: not enough pixel data", nil},
		{"png without its last bytes", pngData[:len(pngData)-30], DecodeOptions{}, "not enough pixel data", nil},
		{"png header cut", pngData[:20], DecodeOptions{}, "unexpected EOF", nil},
		{"truncated progressive", fx["progressive.jpg"][:400], DecodeOptions{}, "short Huffman data", nil},
		{"truncated webp", fx["lossy.webp"][:200], DecodeOptions{}, "unexpected EOF", nil},
		{"png 60000x60000", setPNGSize(pngData, 60000, 60000), DecodeOptions{},
			"image is 60000x60000 (3600.0 MP), over the 100.0 MP limit", ErrTooLarge},
		{"png 20000x20000", setPNGSize(pngData, 20000, 20000), DecodeOptions{},
			"image is 20000x20000 (400.0 MP), over the 100.0 MP limit", ErrTooLarge},
		{"png over a custom limit", pngData, DecodeOptions{MaxPixels: 19*13 - 1},
			"image is 19x13 (247 pixels), over the 246-pixel limit", ErrTooLarge},
		{"png zero width", setPNGSize(pngData, 0, 13), DecodeOptions{}, "", nil},
		{"jpeg 60000x60000", setJPEGSize(t, jpegData, 60000, 60000), DecodeOptions{}, "(3600.0 MP), over the 100.0 MP limit", ErrTooLarge},
		{"gif 65535x65535", gifHuge, DecodeOptions{}, "over the 100.0 MP limit", ErrTooLarge},
		{"bmp 50000x50000", bmpHuge, DecodeOptions{}, "over the 100.0 MP limit", ErrTooLarge},
		// x/image/tiff refuses this one itself, before our limit check.
		{"tiff 4e9x4e9", setTIFFSize(t, cases["tiff-rgba"], 0xffffffff, 0xffffffff), DecodeOptions{}, "image too large", nil},
		{"tiff 200000x1000", setTIFFSize(t, cases["tiff-rgba"], 200000, 1000), DecodeOptions{MaxPixels: 150_000_000}, "(200.0 MP), over the 150.0 MP limit", ErrTooLarge},
		{"webp 16384x16384", webpHuge, DecodeOptions{}, "(268.4 MP), over the 100.0 MP limit", ErrTooLarge},
		{"negative limit", pngData, DecodeOptions{MaxPixels: -1}, "negative", nil},
		// Under the limit, but far too short for the size the header claims:
		// refused before the decoder allocates the image.
		{"png header claims 9000x9000", setPNGSize(pngData, 9000, 9000), DecodeOptions{},
			"unexpected EOF: 767 bytes cannot hold a 9000x9000 png (at least 118652)", io.ErrUnexpectedEOF},
		{"jpeg header claims 9000x9000", setJPEGSize(t, jpegData, 9000, 9000), DecodeOptions{},
			"cannot hold a 9000x9000 jpeg", io.ErrUnexpectedEOF},
		{"bmp header claims 9000x9000", bmpBig, DecodeOptions{}, "cannot hold a 9000x9000 bmp", io.ErrUnexpectedEOF},
	} {
		t.Run(tc.name, func(t *testing.T) {
			alloc := func(w, h, c int) (*Image, error) {
				t.Fatalf("alloc(%d, %d) called for a failing file", w, h)
				return nil, nil
			}
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			m, err := Decode(tc.data, tc.opt, alloc)
			runtime.ReadMemStats(&after)
			if err == nil {
				t.Fatalf("decoded a %dx%d image, want an error", m.W, m.H)
			}
			if !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("error %q does not contain %q", err, tc.msg)
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Fatalf("error %q is not %v", err, tc.is)
			}
			if grew := after.TotalAlloc - before.TotalAlloc; grew > 4<<20 {
				t.Fatalf("refusing it allocated %d bytes", grew)
			}
			if _, herr := DecodeHeader(tc.data, tc.opt); (tc.is == ErrTooLarge || tc.is == io.ErrUnexpectedEOF) && !errors.Is(herr, tc.is) {
				t.Fatalf("DecodeHeader: %v", herr)
			}
		})
	}
}

// TestMinEncodedSizeIsLoose checks the too-short bound against the most
// compressible files real encoders make: 16 MP of one value, as a 1-bit PNG
// at best compression and as a quality-1 JPEG. Both must pass the header
// check with room to spare.
func TestMinEncodedSizeIsLoose(t *testing.T) {
	const side = 4000
	pal := image.NewPaletted(image.Rect(0, 0, side, side), color.Palette{color.Black, color.White})
	gray := image.NewGray(image.Rect(0, 0, side, side))
	for _, tc := range []struct {
		name string
		data []byte
	}{
		{"png", encoded(t, func(b *bytes.Buffer) error {
			return (&png.Encoder{CompressionLevel: png.BestCompression}).Encode(b, pal)
		})},
		{"jpeg", encoded(t, func(b *bytes.Buffer) error { return jpeg.Encode(b, gray, &jpeg.Options{Quality: 1}) })},
	} {
		cfg, _, err := image.DecodeConfig(bytes.NewReader(tc.data))
		if err != nil {
			t.Fatal(err)
		}
		min := minEncodedSize(tc.name, cfg)
		if min == 0 || int64(len(tc.data)) < 2*min {
			t.Errorf("%s: %d bytes, bound %d: too close", tc.name, len(tc.data), min)
		}
		if _, err := DecodeHeader(tc.data, DecodeOptions{}); err != nil {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
}

// TestDecodeLimitEdge accepts an image exactly at the limit.
func TestDecodeLimitEdge(t *testing.T) {
	data := decodeCases(t)["png-rgb"]
	if _, err := Decode(data, DecodeOptions{MaxPixels: 19 * 13}, nil); err != nil {
		t.Fatalf("at the limit: %v", err)
	}
}

func TestDecodeAllocErrors(t *testing.T) {
	data := decodeCases(t)["png-rgb"]
	boom := errors.New("pool exhausted")
	for _, tc := range []struct {
		name  string
		alloc Alloc
		msg   string
	}{
		{"error", func(w, h, c int) (*Image, error) { return nil, boom }, "pool exhausted"},
		{"nil image", func(w, h, c int) (*Image, error) { return nil, nil }, "bad image"},
		{"wrong size", func(w, h, c int) (*Image, error) { return NewImage(w+1, h, c), nil }, "bad image"},
		{"gray", func(w, h, c int) (*Image, error) { return NewImage(w, h, 1), nil }, "bad image"},
		{"short buffer", func(w, h, c int) (*Image, error) {
			return &Image{W: w, H: h, C: 3, Stride: w * 3, Pix: make([]byte, 10)}, nil
		}, "bad image"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Decode(data, DecodeOptions{}, tc.alloc)
			if err == nil || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("error %v, want one containing %q", err, tc.msg)
			}
		})
	}
	if _, err := Decode(data, DecodeOptions{}, func(w, h, c int) (*Image, error) { return nil, boom }); !errors.Is(err, boom) {
		t.Fatalf("alloc's error is not wrapped: %v", err)
	}
}
