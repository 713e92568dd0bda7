package stages

import (
	"bytes"
	"fmt"
	"image"
	"image/color"
	"image/color/palette"
	"image/gif"
	"image/jpeg"
	"image/png"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"

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
