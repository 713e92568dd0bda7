package stages

import (
	"bytes"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/gif"
	"image/jpeg"
	"image/png"
	"io"
	"sync"

	"golang.org/x/image/bmp"
	"golang.org/x/image/tiff"
	"golang.org/x/image/webp"

	"github.com/imgpipe/imgpipe/stages/jpegturbo"
	"github.com/imgpipe/imgpipe/stages/progressive"
)

// DefaultMaxPixels is decode's default pixel limit (100 MP).
const DefaultMaxPixels = 100_000_000

// DecodeOptions controls Decode.
type DecodeOptions struct {
	MaxPixels int64       // refuse images with W*H above this; 0 means DefaultMaxPixels
	Orient    bool        // apply the JPEG EXIF orientation
	JPEG      JPEGBackend // the JPEG decoder; "" means JPEGGo (the decode stage's default is JPEGAuto)
	// Scale, if set, gives the DCT scale at which to decode a JPEG whose
	// header size (after orientation) is w×h, as a denominator of
	// jpegturbo.ScaleDenoms: 2 decodes at half size, each side rounded up
	// (jpegturbo.ScaledSize). Only libjpeg-turbo scales: a JPEG that Go's
	// decoder decodes (JPEGGo, or JPEGTurbo's fallbacks) and every other
	// format come at full size, and DecodeBy says which scale was applied.
	// The pixel limit is checked on the full size all the same. nil: 1.
	Scale func(w, h int) int
}

// JPEGBackend names a JPEG decoder.
type JPEGBackend string

// The JPEG backends.
const (
	// JPEGGo is Go's image/jpeg, the default: the same bits on every
	// machine, and the reference the GPU path and tests compare against.
	JPEGGo JPEGBackend = "go"
	// JPEGTurbo is libjpeg-turbo (package stages/jpegturbo), loaded at run
	// time: several times as fast on photos (see
	// bench/results/2026-12-07-code-comments.md#stages), but its pixels differ slightly
	// from JPEGGo's (another IDCT, interpolated chroma). CMYK and YCCK
	// files, and files whose header the library refuses, still go to Go's
	// decoder. Truncated and corrupt files fail as they do with JPEGGo (see
	// package jpegturbo).
	JPEGTurbo JPEGBackend = "turbo"
	// JPEGAuto is the fastest decoder that works here: see
	// ResolveJPEGBackend. The report names the one each input got.
	JPEGAuto JPEGBackend = "auto"
)

// JPEGBackends are the backend names in the order the decode stage lists them.
var JPEGBackends = []JPEGBackend{JPEGAuto, JPEGGo, JPEGTurbo}

// TurboInstallHint says how to get libjpeg-turbo; JPEGAuto's fallback
// passes it on.
const TurboInstallHint = "install libjpeg-turbo (Debian/Ubuntu: apt-get install libturbojpeg0) for JPEG decoding 3-5x faster"

// ResolveJPEGBackend is the one place that says what b means on this
// machine: JPEGAuto becomes JPEGTurbo when libjpeg-turbo loads and JPEGGo
// otherwise, in which case note says so and how to install the library (a
// run says it once); any other backend is itself. It does not check b (see
// JPEGBackend.Check).
func ResolveJPEGBackend(b JPEGBackend) (resolved JPEGBackend, note string) {
	return resolveJPEGBackend(b, jpegturbo.Available)
}

// resolveJPEGBackend is ResolveJPEGBackend with the library check as an
// argument, so that tests see both answers on any machine.
func resolveJPEGBackend(b JPEGBackend, turbo func() error) (JPEGBackend, string) {
	switch b {
	case "":
		return JPEGGo, ""
	case JPEGAuto:
		if err := turbo(); err != nil {
			return JPEGGo, fmt.Sprintf("decode backend=auto: decoding JPEG with Go's decoder, since %v; %s", err, TurboInstallHint)
		}
		return JPEGTurbo, ""
	}
	return b, ""
}

// Check returns nil when b can be used here: an error for an unknown name,
// and for JPEGTurbo the reason libjpeg-turbo cannot be loaded, if any.
// JPEGAuto always can.
func (b JPEGBackend) Check() error {
	switch b {
	case "", JPEGGo, JPEGAuto:
		return nil
	case JPEGTurbo:
		return jpegturbo.Available()
	}
	return fmt.Errorf("unknown JPEG backend %q (want %q, %q or %q)", string(b), JPEGAuto, JPEGGo, JPEGTurbo)
}

// Alloc returns a w×h image with c channels for the decoder to fill. It is
// called at most once per decode, after the header checks. The buffer may
// hold old data: Decode writes every pixel byte (and no padding byte).
// Decode calls it once the pixels have been decoded, so a failing file never
// takes a buffer from it, with one exception: with JPEGTurbo an upright JPEG
// is decoded straight into the buffer, so a JPEG whose scan data turns out
// to be corrupt has taken one when Decode fails (Decode keeps no reference
// to it).
type Alloc func(w, h, c int) (*Image, error)

// ErrUnknownFormat is returned for data that is none of the supported formats.
var ErrUnknownFormat = errors.New("unknown image format")

// ErrEmpty is returned for zero-byte input.
var ErrEmpty = errors.New("empty file")

// ErrTooLarge is matched (with errors.Is) by the error Decode and
// DecodeHeader return for an image over the pixel limit.
var ErrTooLarge = errors.New("image over the pixel limit")

// LimitError says that an image's header claims more pixels than allowed.
type LimitError struct {
	W, H      int   // dimensions from the header
	MaxPixels int64 // the limit in force
}

// Error gives the size and the limit in megapixels, e.g.
// "image is 20000x20000 (400.0 MP), over the 100.0 MP limit".
// Limits under 0.1 MP (set in tests or for thumbnails) are given in pixels,
// where "0.0 MP" would say nothing.
func (e *LimitError) Error() string {
	if e.MaxPixels < 100_000 {
		return fmt.Sprintf("image is %dx%d (%d pixels), over the %d-pixel limit", e.W, e.H, uint64(e.W)*uint64(e.H), e.MaxPixels)
	}
	mp := float64(e.W) * float64(e.H) / 1e6
	return fmt.Sprintf("image is %dx%d (%.1f MP), over the %.1f MP limit", e.W, e.H, mp, float64(e.MaxPixels)/1e6)
}

// Unwrap lets errors.Is(err, ErrTooLarge) match.
func (e *LimitError) Unwrap() error { return ErrTooLarge }

// Header is what Decode learns from a file before decoding any pixel.
type Header struct {
	Format string // "jpeg", "png", "gif", "bmp", "tiff" or "webp"
	// W and H are the dimensions of the decoded result: the stored ones with
	// W and H swapped when the applied orientation is 5..8.
	W, H int
	// Orientation is the EXIF orientation applied (1..8); 1 when none is, or
	// when DecodeOptions.Orient is false, or for formats other than JPEG.
	Orientation int
}

// format is one supported file format: how to recognise it and its decoders.
type format struct {
	name   string
	match  func([]byte) bool
	config func(io.Reader) (image.Config, error)
	decode func(io.Reader) (image.Image, error)
}

// formats is fixed here rather than taken from image.RegisterFormat so that
// what decode accepts does not depend on which packages happen to be linked.
var formats = []format{
	{"jpeg", prefix("\xff\xd8"), jpeg.DecodeConfig, jpeg.Decode},
	{"png", prefix("\x89PNG\r\n\x1a\n"), png.DecodeConfig, png.Decode},
	{"gif", func(b []byte) bool {
		return len(b) >= 6 && string(b[:4]) == "GIF8" && (b[4] == '7' || b[4] == '9') && b[5] == 'a'
	}, gif.DecodeConfig, gif.Decode},
	// The same magic as x/image/bmp registers: "BM", file size, four zero
	// reserved bytes.
	{"bmp", func(b []byte) bool {
		return len(b) >= 10 && b[0] == 'B' && b[1] == 'M' && b[6]|b[7]|b[8]|b[9] == 0
	}, bmp.DecodeConfig, bmp.Decode},
	{"tiff", func(b []byte) bool {
		return len(b) >= 4 && (string(b[:4]) == "II*\x00" || string(b[:4]) == "MM\x00*")
	}, tiff.DecodeConfig, tiff.Decode},
	{"webp", func(b []byte) bool {
		return len(b) >= 15 && string(b[:4]) == "RIFF" && string(b[8:15]) == "WEBPVP8"
	}, webp.DecodeConfig, webp.Decode},
}

func prefix(p string) func([]byte) bool {
	return func(b []byte) bool { return len(b) >= len(p) && string(b[:len(p)]) == p }
}

// Sniff names the format of data from its first bytes ("jpeg", "png",
// "gif", "bmp", "tiff", "webp"), or returns "" when it is none of them.
func Sniff(data []byte) string {
	if f := sniff(data); f != nil {
		return f.name
	}
	return ""
}

func sniff(data []byte) *format {
	for i := range formats {
		if formats[i].match(data) {
			return &formats[i]
		}
	}
	return nil
}

// DecodeHeader reads only the header of data and checks it against the pixel
// limit of opt, without decoding or allocating pixels.
func DecodeHeader(data []byte, opt DecodeOptions) (Header, error) {
	h, _, _, err := readHeader(data, opt)
	return h, err
}

// CheckFile reads the header of data, a whole file, and checks it as Decode
// does before decoding any pixel: the pixel limit of opt, the size the header
// implies (see minEncodedSize) and, for a JPEG, the scan limits
// (MaxJPEGScans, MaxJPEGPasses). A decoder with no limits of its own (the
// GPU's) is given only files that pass it.
func CheckFile(data []byte, opt DecodeOptions) (Header, error) {
	h, _, _, err := checkFile(data, opt)
	return h, err
}

// checkFile is CheckFile with readHeader's results.
func checkFile(data []byte, opt DecodeOptions) (Header, *format, image.Point, error) {
	hd, f, canvas, err := readHeader(data, opt)
	if err == nil && f.name == "jpeg" {
		// On every backend: Go's decoder has no scan limit of its own.
		err = checkJPEGWork(data)
	}
	if err != nil {
		return Header{}, nil, image.Point{}, err
	}
	return hd, f, canvas, nil
}

// readHeader is readHeaderSized for data that is the whole file.
func readHeader(data []byte, opt DecodeOptions) (Header, *format, image.Point, error) {
	return readHeaderSized(data, int64(len(data)), opt)
}

// readHeaderSized returns the header, the format and the stored (canvas)
// dimensions, or an error for unknown, broken or oversized files; data is the
// start of a file of size bytes.
func readHeaderSized(data []byte, size int64, opt DecodeOptions) (Header, *format, image.Point, error) {
	max := opt.MaxPixels
	if max == 0 {
		max = DefaultMaxPixels
	}
	if max < 0 {
		return Header{}, nil, image.Point{}, fmt.Errorf("pixel limit %d is negative", max)
	}
	if opt.JPEG != "" && opt.JPEG != JPEGGo && opt.JPEG != JPEGTurbo && opt.JPEG != JPEGAuto {
		return Header{}, nil, image.Point{}, opt.JPEG.Check()
	}
	if len(data) == 0 {
		return Header{}, nil, image.Point{}, ErrEmpty
	}
	f := sniff(data)
	if f == nil {
		return Header{}, nil, image.Point{}, ErrUnknownFormat
	}
	cfg, err := f.config(bytes.NewReader(data))
	if _, beyondGo := err.(jpeg.UnsupportedError); beyondGo {
		cfg, err = jpegConfigBeyondGo(data, opt.JPEG, err)
	}
	if err != nil {
		return Header{}, nil, image.Point{}, plainError(err)
	}
	w, h := cfg.Width, cfg.Height
	if w <= 0 || h <= 0 {
		return Header{}, nil, image.Point{}, fmt.Errorf("image is %dx%d, want at least 1x1", w, h)
	}
	// w > max/h rather than w*h > max: TIFF dimensions are 32-bit each, so
	// the product can overflow int64.
	if int64(w) > max/int64(h) {
		return Header{}, nil, image.Point{}, &LimitError{W: w, H: h, MaxPixels: max}
	}
	if min := minEncodedSize(f.name, cfg); size < min {
		return Header{}, nil, image.Point{}, fmt.Errorf("%w: %d bytes cannot hold a %dx%d %s (at least %d)", io.ErrUnexpectedEOF, size, w, h, f.name, min)
	}
	hd := Header{Format: f.name, W: w, H: h, Orientation: 1}
	if opt.Orient && f.name == "jpeg" {
		hd.Orientation = jpegOrientation(data)
		if hd.Orientation >= 5 {
			hd.W, hd.H = h, w
		}
	}
	return hd, f, image.Pt(w, h), nil
}

// jpegConfigBeyondGo reads the header of a JPEG that Go's decoder refused as unsupported
// (goErr). libjpeg-turbo reads arithmetic-coded JPEGs, so where it is the backend its own
// header parser answers, and it decodes the pixels; otherwise the error names the coding
// (JPEGCoding) rather than Go's "unknown marker".
func jpegConfigBeyondGo(data []byte, b JPEGBackend, goErr error) (image.Config, error) {
	coding := JPEGCoding(data)
	if backend, _ := ResolveJPEGBackend(b); backend == JPEGTurbo {
		th, err := jpegturbo.DecodeHeader(data)
		switch {
		case err == nil:
			return image.Config{Width: th.W, Height: th.H}, nil
		case coding != "":
			return image.Config{}, fmt.Errorf("%s JPEG: %w", coding, err)
		}
		return image.Config{}, err
	}
	if coding != "" {
		return image.Config{}, fmt.Errorf("%s JPEG: Go's decoder cannot read it (decode backend=turbo reads arithmetic-coded ones)", coding)
	}
	return image.Config{}, goErr
}

// minEncodedSize is a lower bound on the size of any valid file of cfg's
// dimensions, or 0 where none is cheap to state. The decoders allocate the
// whole image before they find that the data runs out, so a few-byte file
// whose header claims 10000x10000 would otherwise cost hundreds of MB before
// failing. The bounds are loose on purpose (several times below what any
// encoder can reach), so no valid file is refused:
//   - JPEG: every 8x8 block of the full-resolution component costs at least
//     one bit in its DC scan; we require a 64th of a byte per block.
//   - PNG: deflate cannot do better than 1032:1, and a pixel is at least
//     one bit (more for the colour models that imply a depth); we divide
//     by 2048.
//   - BMP: x/image/bmp reads only uncompressed files, at least a bit a pixel.
//
// GIF is exempt (a tiny first frame on a huge logical screen is valid), as
// are TIFF and WebP.
func minEncodedSize(format string, cfg image.Config) int64 {
	px := int64(cfg.Width) * int64(cfg.Height) // under the pixel limit here
	switch format {
	case "jpeg":
		blocks := int64((cfg.Width+7)/8) * int64((cfg.Height+7)/8)
		return blocks / 64
	case "png":
		bits := int64(1) // 1-bit gray or palette
		switch cfg.ColorModel {
		case color.Gray16Model, color.NRGBAModel: // NRGBA: gray+alpha 8 at least
			bits = 16
		case color.RGBAModel:
			bits = 24
		case color.NRGBA64Model:
			bits = 32
		case color.RGBA64Model:
			bits = 48
		}
		return px * bits / 8 / 2048
	case "bmp":
		return px / 8
	}
	return 0
}

// Decode decodes an encoded image into RGB (C = 3) pixels in memory from
// alloc (nil: NewImage).
//
// The header is read and checked against opt.MaxPixels first; a file over
// the limit is refused before any pixel memory is allocated, and so is a
// JPEG, PNG or BMP file far too short to hold the size its header claims
// (see minEncodedSize). Conversions: alpha
// is dropped and the stored colour values are kept (no premultiplication;
// for the premultiplied RGBA of TIFF associated alpha the stored, already
// premultiplied, values are what is kept); palettes are expanded; 16-bit
// samples become v>>8; gray becomes R = G = B; YCbCr uses the standard
// library's color.YCbCrToRGB arithmetic; CMYK uses color.CMYKToRGB.
//
// A GIF yields its first frame on the GIF's logical screen: the result has
// the screen's size and any area the frame does not cover is black. (Go's GIF
// decoder maps the transparent palette index to black as well.)
//
// Errors are short and plain, e.g. "unexpected EOF", "unknown image format",
// "image is 20000x20000 (400.0 MP), over the 100.0 MP limit"; callers add
// their own "decode: " prefix.
func Decode(data []byte, opt DecodeOptions, alloc Alloc) (*Image, error) {
	m, _, err := DecodeBy(data, opt, alloc)
	return m, err
}

// Decoded says how DecodeBy made an image's pixels, for the report.
type Decoded struct {
	// Backend is JPEGTurbo for a JPEG that libjpeg-turbo decoded, JPEGGo for
	// everything else (Go's decoders, and JPEGTurbo's fallbacks).
	Backend JPEGBackend
	// Scale is the denominator of the DCT scale applied: 1 for full size.
	Scale int
}

// DecodeBy is Decode that also tells which decoder made the pixels and at
// which scale (see DecodeOptions.Scale). opt.JPEG = JPEGAuto is resolved by
// ResolveJPEGBackend on every call (cheap: the library is loaded once).
func DecodeBy(data []byte, opt DecodeOptions, alloc Alloc) (*Image, Decoded, error) {
	hd, f, canvas, err := checkFile(data, opt)
	if err != nil {
		return nil, Decoded{}, err
	}
	if backend, _ := ResolveJPEGBackend(opt.JPEG); f.name == "jpeg" && backend == JPEGTurbo {
		denom := 1
		if opt.Scale != nil {
			denom = opt.Scale(hd.W, hd.H)
		}
		if !jpegturbo.ValidDenom(denom) {
			return nil, Decoded{}, fmt.Errorf("decode scale 1/%d is not one of 1, 1/2, 1/4, 1/8", denom)
		}
		if m, done, err := decodeTurbo(data, hd, canvas, denom, alloc); done {
			return m, Decoded{JPEGTurbo, denom}, err
		}
	}
	m, err := decodeGo(bytes.NewReader(data), f, hd, canvas, alloc)
	return m, Decoded{JPEGGo, 1}, err
}

// decodeGo decodes the file r gives with Go's decoder of format f (readHeader's results,
// from the same file).
func decodeGo(r io.Reader, f *format, hd Header, canvas image.Point, alloc Alloc) (*Image, error) {
	src, err := f.decode(r)
	if err != nil {
		return nil, plainError(err)
	}
	b := src.Bounds()
	if !b.In(image.Rectangle{Max: canvas}) || b.Empty() {
		// The decoders guarantee this; a file that gets past them anyway
		// must not make us write out of bounds.
		return nil, fmt.Errorf("decoded bounds %v outside the %dx%d header size", b, canvas.X, canvas.Y)
	}
	dst, err := allocRGB(alloc, hd.W, hd.H)
	if err != nil {
		return nil, err
	}
	if b != (image.Rectangle{Max: canvas}) {
		for y := 0; y < dst.H; y++ {
			clear(dst.Row(y))
		}
	}
	paint(dst, src, hd.Orientation, canvas)
	return dst, nil
}

// allocRGB gets the w×h RGB destination from alloc (nil: NewImage) and
// checks that it is one.
func allocRGB(alloc Alloc, w, h int) (*Image, error) {
	if alloc == nil {
		alloc = func(w, h, c int) (*Image, error) { return NewImage(w, h, c), nil }
	}
	dst, err := alloc(w, h, 3)
	if err != nil {
		return nil, fmt.Errorf("allocating %dx%d: %w", w, h, err)
	}
	if dst == nil || dst.W != w || dst.H != h || dst.C != 3 || dst.Check() != nil {
		return nil, fmt.Errorf("allocator returned a bad image for %dx%dx3", w, h)
	}
	return dst, nil
}

// plainError turns decoder errors into the short forms the report shows.
func plainError(err error) error {
	switch {
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		// A decoder that hits the end of the data mid-header reports io.EOF;
		// for a file either way it is truncated.
		return io.ErrUnexpectedEOF
	case errors.Is(err, image.ErrFormat):
		return ErrUnknownFormat
	}
	return err
}

// ---- JPEGTurbo: JPEG through libjpeg-turbo (package jpegturbo) ----

// decodeTurbo decodes a JPEG that readHeader accepted (size, pixel limit and
// orientation are hd's) with libjpeg-turbo at scale 1/denom. done is false, and the caller
// uses Go's decoder, for a file libjpeg-turbo cannot give as RGB (CMYK,
// YCCK) or whose header it refuses though Go's reads it (TurboJPEG 2.x
// refuses 4:1:0 subsampling). A missing library is an error: the caller
// asked for this backend.
func decodeTurbo(data []byte, hd Header, canvas image.Point, denom int, alloc Alloc) (m *Image, done bool, err error) {
	th, err := jpegturbo.DecodeHeader(data)
	if errors.Is(err, jpegturbo.ErrUnavailable) {
		return nil, true, err
	}
	if err != nil || !th.Colorspace.DecodesToRGB() {
		return nil, false, nil
	}
	if th.W != canvas.X || th.H != canvas.Y {
		return nil, true, fmt.Errorf("libjpeg-turbo reads the size as %dx%d, the header says %dx%d", th.W, th.H, canvas.X, canvas.Y)
	}
	// From here on canvas and hd are the sizes at the scale; the orientation
	// turns the scaled picture as it would the full one.
	canvas.X, canvas.Y = jpegturbo.ScaledSize(canvas.X, canvas.Y, denom)
	if denom == 8 && JPEGProgressive(data) {
		var release func()
		data, release = atEighth(data)
		defer release()
	}
	hd.W, hd.H = canvas.X, canvas.Y
	if hd.Orientation >= 5 {
		hd.W, hd.H = canvas.Y, canvas.X
	}
	if hd.Orientation == 1 {
		// Straight into the caller's buffer (page-locked memory for the
		// GPU path, say): no copy.
		dst, err := allocRGB(alloc, hd.W, hd.H)
		if err != nil {
			return nil, true, err
		}
		if err := jpegturbo.DecodeScaled(data, dst.Pix, denom, dst.W, dst.H, dst.Stride, jpegturbo.PixelRGB); err != nil {
			return nil, true, plainError(err)
		}
		return dst, true, nil
	}
	// Other orientations: decode upright as an opaque image.RGBA, then turn
	// it with the same paint as the Go path (4 bytes a pixel for a while,
	// where Go's decoder holds 1.5 to 3 in YCbCr).
	src := image.NewRGBA(image.Rectangle{Max: canvas})
	if err := jpegturbo.DecodeScaled(data, src.Pix, denom, canvas.X, canvas.Y, src.Stride, jpegturbo.PixelRGBX); err != nil {
		return nil, true, plainError(err)
	}
	dst, err := allocRGB(alloc, hd.W, hd.H)
	if err != nil {
		return nil, true, err
	}
	paint(dst, src, hd.Orientation, canvas)
	return dst, true, nil
}

// sequentialFiles hold the files that atEighth rewrites, for reuse.
var sequentialFiles = sync.Pool{New: func() any { return new([]byte) }}

// atEighth returns what libjpeg-turbo should read of a progressive JPEG to decode it at 1/8
// with the least work, and a function to call once it has been read. That is the file
// rewritten as a sequential one with the coefficients that the decode reads
// (progressive.Sequential), whose decode needs no coefficient array of the whole image
// (the progressive decode zeroes 128 bytes a block); or, where the rewrite refuses the file,
// its scans trimmed (progressive.Trim). Either gives the whole file's pixels; the rewrite
// decodes faster than the trimmed scans (BenchmarkDecodeEighthProgressive in package
// progressive; figures in bench/results/2026-12-07-code-comments.md#stages).
func atEighth(data []byte) ([]byte, func()) {
	buf := sequentialFiles.Get().(*[]byte)
	seq, err := progressive.Sequential((*buf)[:0], data, 8)
	if err != nil {
		sequentialFiles.Put(buf)
		return progressive.Trim(data, 8), func() {}
	}
	*buf = seq
	return seq, func() { sequentialFiles.Put(buf) }
}
