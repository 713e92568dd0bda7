package stages

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"image"
	"image/color"
	"image/color/palette"
	"image/gif"
	"image/jpeg"
	"image/png"
	"io"
	"math/rand"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/disintegration/imaging"
	"golang.org/x/image/bmp"
	"golang.org/x/image/tiff"
)

// pattern returns a deterministic w×h test picture with noise, so that
// every pixel differs from its neighbours and flips are visible.
func pattern(w, h int, seed int64) *image.NRGBA {
	rng := rand.New(rand.NewSource(seed))
	m := image.NewNRGBA(image.Rect(0, 0, w, h))
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			m.SetNRGBA(x, y, color.NRGBA{
				R: byte(x*255/max(1, w-1)) ^ byte(rng.Intn(16)),
				G: byte(y*255/max(1, h-1)) ^ byte(rng.Intn(16)),
				B: byte(rng.Intn(256)),
				A: byte(rng.Intn(256)),
			})
		}
	}
	return m
}

func encoded(t testing.TB, enc func(*bytes.Buffer) error) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := enc(&b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// decodeCases are Go-encodable inputs covering each decoder's image types.
func decodeCases(t testing.TB) map[string][]byte {
	p := pattern(19, 13, 1)
	opaque := image.NewRGBA(p.Rect)
	gray := image.NewGray(p.Rect)
	gray16 := image.NewGray16(p.Rect)
	rgba64 := image.NewRGBA64(p.Rect)
	nrgba64 := image.NewNRGBA64(p.Rect)
	premul := image.NewRGBA(p.Rect) // premultiplied with real alpha
	for y := 0; y < 13; y++ {
		for x := 0; x < 19; x++ {
			c := p.NRGBAAt(x, y)
			opaque.Set(x, y, color.RGBA{c.R, c.G, c.B, 255})
			gray.SetGray(x, y, color.Gray{c.R})
			gray16.SetGray16(x, y, color.Gray16{uint16(c.R)<<8 | uint16(c.B)})
			rgba64.SetRGBA64(x, y, color.RGBA64{uint16(c.R)<<8 | uint16(c.G), uint16(c.G) << 8, uint16(c.B)<<8 | 0xff, 0xffff})
			nrgba64.SetNRGBA64(x, y, color.NRGBA64{uint16(c.R)<<8 | 0x80, uint16(c.G) << 8, uint16(c.B) << 8, uint16(c.A) << 8})
			premul.Set(x, y, c)
		}
	}
	pal := color.Palette{color.RGBA{255, 0, 0, 255}, color.NRGBA{10, 200, 30, 128}, color.RGBA{0, 0, 0, 0}, color.NRGBA{90, 80, 70, 0}}
	paletted := image.NewPaletted(p.Rect, pal)
	plan9 := image.NewPaletted(p.Rect, palette.Plan9)
	for i := range paletted.Pix {
		paletted.Pix[i] = byte(i % len(pal))
		plan9.Pix[i] = byte(i * 7)
	}
	pngOf := func(m image.Image) []byte {
		return encoded(t, func(b *bytes.Buffer) error { return png.Encode(b, m) })
	}
	tiffOf := func(m image.Image, c tiff.CompressionType) []byte {
		return encoded(t, func(b *bytes.Buffer) error { return tiff.Encode(b, m, &tiff.Options{Compression: c}) })
	}
	bmpOf := func(m image.Image) []byte {
		return encoded(t, func(b *bytes.Buffer) error { return bmp.Encode(b, m) })
	}
	return map[string][]byte{
		"jpeg-420":      encoded(t, func(b *bytes.Buffer) error { return jpeg.Encode(b, opaque, &jpeg.Options{Quality: 90}) }),
		"jpeg-gray":     encoded(t, func(b *bytes.Buffer) error { return jpeg.Encode(b, gray, nil) }),
		"png-gray":      pngOf(gray),
		"png-gray16":    pngOf(gray16),
		"png-rgb":       pngOf(opaque),
		"png-rgba":      pngOf(p),
		"png-rgb16":     pngOf(rgba64),
		"png-rgba16":    pngOf(nrgba64),
		"png-paletted":  pngOf(paletted),
		"png-plan9":     pngOf(plan9),
		"gif":           encoded(t, func(b *bytes.Buffer) error { return gif.Encode(b, plan9, nil) }),
		"gif-quantised": encoded(t, func(b *bytes.Buffer) error { return gif.Encode(b, opaque, nil) }),
		"bmp-rgb":       bmpOf(opaque),
		"bmp-rgba":      bmpOf(p),
		"bmp-gray":      bmpOf(gray),
		"bmp-paletted":  bmpOf(plan9),
		"tiff-rgba":     tiffOf(p, tiff.Uncompressed),
		"tiff-premul":   tiffOf(premul, tiff.Deflate),
		"tiff-gray":     tiffOf(gray, tiff.Deflate),
		"tiff-gray16":   tiffOf(gray16, tiff.Uncompressed),
		"tiff-rgba16":   tiffOf(nrgba64, tiff.Deflate),
		"tiff-paletted": tiffOf(paletted, tiff.Uncompressed),
	}
}

// fixtures returns the committed files in testdata by name.
func fixtures(t testing.TB) map[string][]byte {
	t.Helper()
	names, err := filepath.Glob("testdata/*.*")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	for _, n := range names {
		if strings.HasSuffix(n, ".sh") || strings.HasSuffix(n, ".py") || strings.HasSuffix(n, ".md") {
			continue
		}
		b, err := os.ReadFile(n)
		if err != nil {
			t.Fatal(err)
		}
		out[filepath.Base(n)] = b
	}
	if len(out) < 20 {
		t.Fatalf("only %d fixtures in testdata", len(out))
	}
	return out
}

// paddedAlloc hands out strided, poisoned buffers and records the sizes
// asked for.
type paddedAlloc struct {
	pad   int
	calls []image.Point
	got   *Image
}

func (a *paddedAlloc) alloc(w, h, c int) (*Image, error) {
	a.calls = append(a.calls, image.Pt(w, h))
	if c != 3 {
		return nil, fmt.Errorf("asked for %d channels", c)
	}
	a.got = newPadded(w, h, c, a.pad)
	return a.got, nil
}

// TestDecodeFormats decodes every format and image type and compares with
// the standard decoders' output converted pixel by pixel through At.
func TestDecodeFormats(t *testing.T) {
	cases := decodeCases(t)
	for name, data := range fixtures(t) {
		cases[name] = data
	}
	for name, data := range cases {
		t.Run(name, func(t *testing.T) {
			std, _, err := image.Decode(bytes.NewReader(data))
			if err != nil {
				t.Fatal(err)
			}
			a := &paddedAlloc{pad: 5}
			got, err := Decode(data, DecodeOptions{}, a.alloc)
			if err != nil {
				t.Fatal(err)
			}
			if got != a.got || len(a.calls) != 1 {
				t.Fatalf("result is not the one buffer from alloc (%d calls)", len(a.calls))
			}
			if err := got.Check(); err != nil || got.C != 3 {
				t.Fatalf("bad image: %v, C=%d", err, got.C)
			}
			sameImage(t, got, fromStd(std))
			checkPadding(t, got)
		})
	}
}

// TestDecodeSemantics pins the conversion rules on chosen pixels, without
// going through the oracle: alpha dropped with colour kept, 16-bit high
// bytes, palette expansion, gray replication.
func TestDecodeSemantics(t *testing.T) {
	one := func(m image.Image) []byte {
		return encoded(t, func(b *bytes.Buffer) error { return png.Encode(b, m) })
	}
	nrgba := image.NewNRGBA(image.Rect(0, 0, 2, 1))
	nrgba.SetNRGBA(0, 0, color.NRGBA{200, 100, 50, 0})
	nrgba.SetNRGBA(1, 0, color.NRGBA{1, 2, 3, 128})
	n64 := image.NewNRGBA64(image.Rect(0, 0, 2, 1))
	n64.SetNRGBA64(0, 0, color.NRGBA64{0x12ff, 0x3400, 0xabcd, 0})
	n64.SetNRGBA64(1, 0, color.NRGBA64{0xffff, 0x00ff, 0x0100, 0x8000})
	g16 := image.NewGray16(image.Rect(0, 0, 2, 1))
	g16.SetGray16(0, 0, color.Gray16{0x7fff})
	g16.SetGray16(1, 0, color.Gray16{0x0080})
	pal := image.NewPaletted(image.Rect(0, 0, 2, 1), color.Palette{color.NRGBA{9, 8, 7, 0}, color.RGBA{40, 50, 60, 255}})
	pal.Pix[0], pal.Pix[1] = 1, 0
	gray := image.NewGray(image.Rect(0, 0, 2, 1))
	gray.Pix[0], gray.Pix[1] = 17, 250
	for _, tc := range []struct {
		name string
		data []byte
		want []byte
	}{
		{"nrgba keeps colour under zero alpha", one(nrgba), []byte{200, 100, 50, 1, 2, 3}},
		{"16-bit takes the high byte", one(n64), []byte{0x12, 0x34, 0xab, 0xff, 0x00, 0x01}},
		{"gray16 replicated", one(g16), []byte{0x7f, 0x7f, 0x7f, 0, 0, 0}},
		{"palette expanded, transparent entry keeps colour", one(pal), []byte{40, 50, 60, 9, 8, 7}},
		{"gray replicated", one(gray), []byte{17, 17, 17, 250, 250, 250}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := Decode(tc.data, DecodeOptions{}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(m.Pix, tc.want) {
				t.Fatalf("got %v, want %v", m.Pix, tc.want)
			}
		})
	}
}

// orientRef applies EXIF orientation o to src the way the EXIF
// specification describes it: as the inverse map from each output pixel to
// its source pixel.
func orientRef(src *Image, o int) *Image {
	w, h := src.W, src.H
	ow, oh := w, h
	if o >= 5 {
		ow, oh = h, w
	}
	out := NewImage(ow, oh, src.C)
	for y := 0; y < oh; y++ {
		for x := 0; x < ow; x++ {
			var sx, sy int
			switch o {
			case 1:
				sx, sy = x, y
			case 2: // mirror horizontal
				sx, sy = w-1-x, y
			case 3: // rotate 180
				sx, sy = w-1-x, h-1-y
			case 4: // mirror vertical
				sx, sy = x, h-1-y
			case 5: // transpose
				sx, sy = y, x
			case 6: // rotate 90 clockwise: the left column becomes the top row
				sx, sy = y, h-1-x
			case 7: // transverse
				sx, sy = w-1-y, h-1-x
			case 8: // rotate 90 counter-clockwise
				sx, sy = w-1-y, x
			}
			for ch := 0; ch < src.C; ch++ {
				out.Pix[(y*ow+x)*src.C+ch] = at(src, sx, sy, ch)
			}
		}
	}
	return out
}

func TestDecodeOrientation(t *testing.T) {
	fx := fixtures(t)
	upright, err := Decode(fx["orient_1.jpg"], DecodeOptions{Orient: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"orient_1", "orient_2", "orient_3", "orient_4", "orient_5", "orient_6", "orient_7", "orient_8", "orient_3_le", "orient_6_le"} {
		t.Run(name, func(t *testing.T) {
			data := fx[name+".jpg"]
			o := int(name[len("orient_")] - '0')
			a := &paddedAlloc{pad: 7}
			got, err := Decode(data, DecodeOptions{Orient: true}, a.alloc)
			if err != nil {
				t.Fatal(err)
			}
			checkPadding(t, got)
			wantDims := image.Pt(24, 16)
			if o >= 5 {
				wantDims = image.Pt(16, 24)
			}
			if len(a.calls) != 1 || a.calls[0] != wantDims {
				t.Fatalf("alloc asked for %v, want [%v]", a.calls, wantDims)
			}
			hd, err := DecodeHeader(data, DecodeOptions{Orient: true})
			if err != nil || hd.Orientation != o || hd.W != wantDims.X || hd.H != wantDims.Y {
				t.Fatalf("header %+v, %v", hd, err)
			}
			// exiftool changed only the metadata, so the pixels are those
			// of orient_1 turned by our own reading of the EXIF spec...
			sameImage(t, got, orientRef(upright, o))
			// ...and those imaging gives with its own EXIF reader.
			ref, err := imaging.Decode(bytes.NewReader(data), imaging.AutoOrientation(true))
			if err != nil {
				t.Fatal(err)
			}
			sameImage(t, got, fromStd(ref))

			// orient=false leaves the stored pixels alone.
			raw, err := Decode(data, DecodeOptions{Orient: false}, nil)
			if err != nil {
				t.Fatal(err)
			}
			sameImage(t, raw, upright)
		})
	}
}

// TestDecodeGIFFirstFrame checks that the first frame lands at its offset
// on the logical screen, with the uncovered area black, and that a second
// frame is ignored.
func TestDecodeGIFFirstFrame(t *testing.T) {
	pal := color.Palette{color.RGBA{0, 0, 0, 255}, color.RGBA{250, 20, 30, 255}, color.RGBA{5, 6, 7, 255}}
	f1 := image.NewPaletted(image.Rect(3, 2, 7, 5), pal)
	f2 := image.NewPaletted(image.Rect(0, 0, 10, 8), pal)
	for i := range f1.Pix {
		f1.Pix[i] = 1
	}
	for i := range f2.Pix {
		f2.Pix[i] = 2
	}
	data := encoded(t, func(b *bytes.Buffer) error {
		return gif.EncodeAll(b, &gif.GIF{
			Image: []*image.Paletted{f1, f2}, Delay: []int{0, 0},
			Config: image.Config{ColorModel: pal, Width: 10, Height: 8},
		})
	})
	a := &paddedAlloc{pad: 3}
	m, err := Decode(data, DecodeOptions{}, a.alloc)
	if err != nil {
		t.Fatal(err)
	}
	checkPadding(t, m)
	if m.W != 10 || m.H != 8 {
		t.Fatalf("got %dx%d, want the 10x8 screen", m.W, m.H)
	}
	for y := 0; y < 8; y++ {
		for x := 0; x < 10; x++ {
			want := [3]byte{}
			if image.Pt(x, y).In(f1.Rect) {
				want = [3]byte{250, 20, 30}
			}
			if got := [3]byte{at(m, x, y, 0), at(m, x, y, 1), at(m, x, y, 2)}; got != want {
				t.Fatalf("(%d,%d) = %v, want %v", x, y, got, want)
			}
		}
	}
}

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

func TestSniffAndHeader(t *testing.T) {
	cases := decodeCases(t)
	fx := fixtures(t)
	for _, tc := range []struct {
		data   []byte
		format string
		w, h   int
	}{
		{cases["jpeg-420"], "jpeg", 19, 13},
		{cases["png-rgba"], "png", 19, 13},
		{cases["gif"], "gif", 19, 13},
		{cases["bmp-rgb"], "bmp", 19, 13},
		{cases["tiff-gray"], "tiff", 19, 13},
		{fx["lossy.webp"], "webp", 32, 24},
		{fx["cmyk.jpg"], "jpeg", 33, 21},
		{[]byte("GIF87"), "", 0, 0},
		{[]byte("BM\x00\x00\x00\x00\x01\x00\x00\x00"), "", 0, 0},
		{[]byte("RIFF\x00\x00\x00\x00WAVEfmt "), "", 0, 0},
	} {
		if got := Sniff(tc.data); got != tc.format {
			t.Errorf("Sniff(%q...) = %q, want %q", tc.data[:min(8, len(tc.data))], got, tc.format)
		}
		if tc.format == "" {
			continue
		}
		hd, err := DecodeHeader(tc.data, DecodeOptions{Orient: true})
		if err != nil || hd.Format != tc.format || hd.W != tc.w || hd.H != tc.h || hd.Orientation != 1 {
			t.Errorf("%s: header %+v, %v", tc.format, hd, err)
		}
	}
}

// byteOrder is what binary.LittleEndian and binary.BigEndian both are.
type byteOrder interface {
	binary.ByteOrder
	binary.AppendByteOrder
}

// exifJPEG builds the marker segments of a JPEG whose APP1 Exif holds an
// IFD0 with a Make tag and, unless typ is 0, an Orientation tag.
func exifJPEG(bo byteOrder, typ uint16, value uint16) []byte {
	var tiffData []byte
	if bo == byteOrder(binary.LittleEndian) {
		tiffData = []byte("II*\x00")
	} else {
		tiffData = []byte("MM\x00*")
	}
	tiffData = bo.AppendUint32(tiffData, 8)
	n := uint16(1)
	if typ != 0 {
		n = 2
	}
	tiffData = bo.AppendUint16(tiffData, n)
	// Make (0x010F, ASCII, 4 bytes inline) first, so the reader must skip it.
	tiffData = bo.AppendUint16(tiffData, 0x010F)
	tiffData = bo.AppendUint16(tiffData, 2)
	tiffData = bo.AppendUint32(tiffData, 4)
	tiffData = append(tiffData, 'a', 'b', 'c', 0)
	if typ != 0 {
		tiffData = bo.AppendUint16(tiffData, 0x0112)
		tiffData = bo.AppendUint16(tiffData, typ)
		tiffData = bo.AppendUint32(tiffData, 1)
		tiffData = bo.AppendUint16(tiffData, value)
		tiffData = append(tiffData, 0, 0)
	}
	tiffData = bo.AppendUint32(tiffData, 0) // no next IFD
	app1 := append([]byte("Exif\x00\x00"), tiffData...)
	out := []byte{0xff, 0xd8}
	out = append(out, 0xff, 0xe0, 0, 6, 'J', 'F', 'I', 'F') // an APP0 to skip
	out = append(out, 0xff, 0xff)                           // a fill byte
	out = append(out, 0xff, 0xe1)
	out = binary.BigEndian.AppendUint16(out, uint16(len(app1)+2))
	out = append(out, app1...)
	return append(out, 0xff, 0xda, 0, 2, 0xff, 0xd9)
}

func TestJPEGOrientation(t *testing.T) {
	le, be := byteOrder(binary.LittleEndian), byteOrder(binary.BigEndian)
	for o := uint16(1); o <= 8; o++ {
		for _, bo := range []byteOrder{le, be} {
			if got := jpegOrientation(exifJPEG(bo, 3, o)); got != int(o) {
				t.Errorf("%v orientation %d read as %d", bo, o, got)
			}
		}
	}
	good := exifJPEG(be, 3, 6)
	sos := append([]byte{0xff, 0xd8, 0xff, 0xda, 0, 2}, good[2:]...)
	for _, tc := range []struct {
		name string
		data []byte
	}{
		{"no orientation tag", exifJPEG(le, 0, 0)},
		{"value 0", exifJPEG(le, 3, 0)},
		{"value 9", exifJPEG(be, 3, 9)},
		{"LONG type", exifJPEG(be, 4, 6)},
		{"Exif after SOS", sos},
		{"truncated segment", good[:30]},
		{"not a JPEG", append([]byte{0x89, 'P'}, good[2:]...)},
		{"empty", nil},
		{"bad byte order", bytes.Replace(good, []byte("MM\x00*"), []byte("XX\x00*"), 1)},
		{"IFD offset past end", bytes.Replace(good, []byte("MM\x00*\x00\x00\x00\x08"), []byte("MM\x00*\x7f\x00\x00\x08"), 1)},
	} {
		if got := jpegOrientation(tc.data); got != 1 {
			t.Errorf("%s: orientation %d, want 1", tc.name, got)
		}
	}
	// A count that runs past the segment stops at the end without panicking.
	long := bytes.Clone(good)
	i := bytes.Index(long, []byte("MM\x00*")) + 8
	long[i], long[i+1] = 0xff, 0xff
	if got := jpegOrientation(long); got != 6 {
		t.Errorf("entry count past the end: %d, want 6 (the tag is still in range)", got)
	}
}

// fuzzDecodeTime bounds one decode of FuzzDecode (1 MP at most).
const fuzzDecodeTime = 2 * time.Second

// fuzzStreamHead is the head FuzzDecode gives a streamed decode: small, so that most of a
// fuzzed file is read from the stream rather than replayed.
const fuzzStreamHead = 64

// FuzzDecode checks that no input panics Decode or DecodeStream and that a successful
// decode returns a consistent RGB image within the limit, the same pixels both ways.
// Slow and greedy inputs are findings too: a decode may take at most fuzzDecodeTime and
// allocate at most what DecodeCost charges for it plus a few times the file (a scan bomb
// or a decoder that allocates beyond its working set fails); a streamed decode, which the
// run charges without the file's bytes, may not allocate in proportion to the file.
func FuzzDecode(f *testing.F) {
	for _, data := range fixtures(f) {
		f.Add(data)
	}
	for _, data := range decodeCases(f) {
		f.Add(data)
	}
	f.Add(exifJPEG(binary.LittleEndian, 3, 6))
	f.Add(tiffIFDFirst(30, 20))
	f.Fuzz(func(t *testing.T, data []byte) {
		opt := DecodeOptions{MaxPixels: 1 << 20, Orient: true}
		var work int64
		if c, cerr := DecodeCost(data, int64(len(data)), opt); cerr == nil {
			work = 2 * c.WorkBytes
		}
		m, err := boundedDecode(t, "decode", work+int64(4*len(data))+1<<20, func() (*Image, error) {
			return Decode(data, opt, nil)
		})
		if Streamed(Sniff(data)) {
			head := data[:min(len(data), fuzzStreamHead)]
			if _, herr := DecodeHeader(head, opt); herr != nil {
				head = data // the header lies further on
			}
			sm, serr := boundedDecode(t, "streamed decode", work+StreamBufferBytes+1<<20, func() (*Image, error) {
				return DecodeStream(head, bytes.NewReader(data), int64(len(data)), opt, nil)
			})
			if (err == nil) != (serr == nil) || err == nil && !bytes.Equal(m.Pix, sm.Pix) {
				t.Fatalf("streamed decode (%v) disagrees with Decode (%v)", serr, err)
			}
		}
		if err != nil {
			return
		}
		if err := m.Check(); err != nil || m.C != 3 {
			t.Fatalf("inconsistent image: %v, C=%d", err, m.C)
		}
		if int64(m.W)*int64(m.H) > opt.MaxPixels {
			t.Fatalf("%dx%d is over the limit", m.W, m.H)
		}
		hd, err := DecodeHeader(data, opt)
		if err != nil || hd.W != m.W || hd.H != m.H {
			t.Fatalf("header %+v (%v) disagrees with the %dx%d result", hd, err, m.W, m.H)
		}
	})
}

// boundedDecode runs decode and fails t when it takes longer than fuzzDecodeTime or
// allocates more than allowed bytes, or returns both an image and an error.
func boundedDecode(t *testing.T, what string, allowed int64, decode func() (*Image, error)) (*Image, error) {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	t0 := time.Now()
	m, err := decode()
	took := time.Since(t0)
	runtime.ReadMemStats(&after)
	// A bound far above any honest decode of 1 MP, so only pathological inputs hit it.
	if took > fuzzDecodeTime {
		t.Fatalf("%s took %v", what, took)
	}
	if got := int64(after.TotalAlloc - before.TotalAlloc); got > allowed {
		t.Fatalf("%s allocated %d bytes, over the %d its cost allows", what, got, allowed)
	}
	if err != nil && m != nil {
		t.Fatalf("%s returned an image and an error", what)
	}
	return m, err
}
