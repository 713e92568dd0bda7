package stages

import (
	"fmt"
	"image"
	"image/jpeg"
	"io"
	"sync"

	"github.com/imgpipe/imgpipe/stages/jpegturbo"
)

// DefaultJPEGQuality is the JPEG quality used when SaveOptions.Quality is 0.
const DefaultJPEGQuality = 95

// PNG compression settings for SaveOptions.Compression, besides the zlib
// levels 1 (fastest) to 9 (smallest).
const (
	// PNGFast, the zero value, is imgpipe's own encoding (package pngfast,
	// docs/png-fast.md): Sub filter and Huffman coding in independent
	// 64 KiB blocks, the same bytes from the CPU and the GPU encoder, several
	// times faster than level 1 and about as small on photos (see
	// BenchmarkEncodePNG).
	PNGFast = 0
	// PNGNoCompression stores the rows without compressing them.
	PNGNoCompression = -1
)

// SaveOptions controls Encode.
type SaveOptions struct {
	Format  string // one of SaveFormats(): "png" (the default when empty), "jpeg" ("jpg"), "webp", "tiff" ("tif"), "npy"
	Quality int    // JPEG and lossy WebP quality 1..100; 0 means DefaultJPEGQuality
	// Lossless selects lossless WebP (Quality is then unused).
	Lossless bool
	// Compression is PNGFast (0, the default), the PNG zlib level 1..9
	// (level 1 filters every row with Sub, higher levels pick a filter per
	// row), or PNGNoCompression. Every setting is lossless; higher levels
	// are smaller and slower. For TIFF, PNGNoCompression stores and anything
	// else uses Deflate.
	Compression int
}

// normalize fills in defaults and checks ranges, so that a bad option is
// reported before any output is written.
func (o SaveOptions) normalize() (SaveOptions, error) {
	if o.Format == "" {
		o.Format = saveFormats[0].name
	}
	f := lookupFormat(o.Format)
	if f == nil {
		return o, errUnknownFormat(o.Format)
	}
	o.Format = f.name
	if o.Quality == 0 {
		o.Quality = DefaultJPEGQuality
	}
	if o.Quality < 1 || o.Quality > 100 {
		return o, fmt.Errorf("quality %d is not in 1..100", o.Quality)
	}
	if o.Compression < PNGNoCompression || o.Compression > 9 {
		return o, fmt.Errorf("png compression %d is not in -1..9", o.Compression)
	}
	return o, nil
}

// Validate reports whether opt is usable, with the error Encode would give.
func (o SaveOptions) Validate() error {
	_, err := o.normalize()
	return err
}

// Encode writes m to w in opt's format: PNG (lossless, 8-bit gray for C = 1,
// 8-bit RGB for C = 3), baseline JPEG (4:2:0 for C = 3, gray for C = 1), WebP
// (libwebp, see encodeWebP), TIFF (encodeTIFF) or a NumPy array (encodeNPY).
func Encode(w io.Writer, m *Image, opt SaveOptions) error {
	if m == nil {
		return fmt.Errorf("no image to encode")
	}
	if err := m.Check(); err != nil {
		return err
	}
	opt, err := opt.normalize()
	if err != nil {
		return err
	}
	return lookupFormat(opt.Format).encode(w, m, opt)
}

// rgbaPool recycles the RGBA copies the JPEG encoder needs for C = 3: its
// fast path is for *image.RGBA, and anything else goes through per-pixel
// interface calls.
var rgbaPool sync.Pool

// EncoderJPEGTurbo is JPEGEncoder's name for libjpeg-turbo's encoder.
const EncoderJPEGTurbo = "jpeg-turbo"

// JPEGEncoder names the encoder of save format=jpeg on this machine, for the report:
// EncoderJPEGTurbo where libjpeg-turbo loads (much faster than Go's on a thumbnail:
// bench/results/2026-12-07-code-comments.md#stages), else "jpeg", Go's image/jpeg. Both write baseline JPEG with 4:2:0 chroma (gray
// for C = 1) and the same quantisation tables for a quality, but not the same bytes.
func JPEGEncoder() string {
	if jpegturbo.Available() == nil {
		return EncoderJPEGTurbo
	}
	return "jpeg"
}

func encodeJPEG(w io.Writer, m *Image, quality int) error {
	// image/jpeg refuses these too, but only after we made the RGBA copy.
	if m.W >= 1<<16 || m.H >= 1<<16 {
		return fmt.Errorf("image is %dx%d, over JPEG's 65535 limit", m.W, m.H)
	}
	if jpegturbo.Available() == nil {
		f := jpegturbo.PixelRGB
		if m.C == 1 {
			f = jpegturbo.PixelGray
		}
		return jpegturbo.Encode(w, m.Pix, m.W, m.H, m.Stride, f, quality)
	}
	rect := image.Rect(0, 0, m.W, m.H)
	jo := &jpeg.Options{Quality: quality}
	if m.C == 1 {
		// image.Gray honours the stride, so the pixels are used in place.
		return jpeg.Encode(w, &image.Gray{Pix: m.Pix, Stride: m.Stride, Rect: rect}, jo)
	}
	var buf []byte
	if p, ok := rgbaPool.Get().(*[]byte); ok {
		buf = *p
	}
	buf = grow(buf, m.W*m.H*4)
	defer func() { rgbaPool.Put(&buf) }()
	for y := 0; y < m.H; y++ {
		in := m.Row(y)
		out := buf[y*m.W*4 : (y+1)*m.W*4]
		for x := 0; x < m.W; x++ {
			p := in[3*x : 3*x+3 : 3*x+3]
			o := out[4*x : 4*x+4 : 4*x+4]
			o[0], o[1], o[2], o[3] = p[0], p[1], p[2], 0xff
		}
	}
	return jpeg.Encode(w, &image.RGBA{Pix: buf, Stride: m.W * 4, Rect: rect}, jo)
}
