package jpegturbo

import (
	"errors"
	"fmt"
	"io"
	"math"
	"runtime"
	"strings"
	"sync"
	"unsafe"
)

// LibraryName is the library Available and the decoders open.
const LibraryName = "libturbojpeg.so.0"

// ErrUnavailable is wrapped by every error that says the library cannot be
// used at all (not found, or too old).
var ErrUnavailable = errors.New("libjpeg-turbo unavailable")

// Colorspace is the colour space of a JPEG file as libjpeg-turbo reads it
// (TJCS_*).
type Colorspace int

// The colour spaces of TurboJPEG. RGB, YCbCr and Gray decode to RGB; CMYK and
// YCCK cannot (libjpeg-turbo has no CMYK to RGB conversion).
const (
	RGB   Colorspace = 0
	YCbCr Colorspace = 1
	Gray  Colorspace = 2
	CMYK  Colorspace = 3
	YCCK  Colorspace = 4
)

// String names the colour space, e.g. "YCbCr".
func (c Colorspace) String() string {
	switch c {
	case RGB:
		return "RGB"
	case YCbCr:
		return "YCbCr"
	case Gray:
		return "Gray"
	case CMYK:
		return "CMYK"
	case YCCK:
		return "YCCK"
	}
	return fmt.Sprintf("Colorspace(%d)", int(c))
}

// DecodesToRGB reports whether Decode can decode this colour space.
func (c Colorspace) DecodesToRGB() bool { return c == RGB || c == YCbCr || c == Gray }

// Header is what the library reads from a file's header.
type Header struct {
	W, H       int
	Colorspace Colorspace
}

// Error is a failure that libjpeg-turbo reported.
type Error struct {
	// Msg is libjpeg-turbo's message, e.g. "Corrupt JPEG data: bad Huffman
	// code".
	Msg string
	// Warning is what tjGetErrorCode says: the library went on decoding
	// by guessing, and this package made that an error. TurboJPEG 2.x also
	// sets it when a fatal error followed a warning.
	Warning bool
}

// Error returns the library's message.
func (e *Error) Error() string { return e.Msg }

// Unwrap returns io.ErrUnexpectedEOF for a truncated file, nil otherwise.
func (e *Error) Unwrap() error {
	if strings.HasPrefix(e.Msg, msgEOF) {
		return io.ErrUnexpectedEOF
	}
	return nil
}

// msgEOF is libjpeg's JWRN_JPEG_EOF: the data ended before the image did.
const msgEOF = "Premature end of JPEG file"

// harmlessWarnings are parts of libjpeg's warning messages (jerror.h) about
// metadata or stray bytes that the decoder skips without guessing at any
// pixel. Every other warning means corrupt or missing image data.
var harmlessWarnings = []string{
	"extraneous bytes before marker", // JWRN_EXTRANEOUS_DATA
	"unknown JFIF revision number",   // JWRN_JFIF_MAJOR
	"Unknown Adobe color transform",  // JWRN_ADOBE_XFORM
	"bad ICC marker",                 // JWRN_BOGUS_ICC
}

func harmless(msg string) bool {
	for _, h := range harmlessWarnings {
		if strings.Contains(msg, h) {
			return true
		}
	}
	return false
}

// PixelFormat is the layout Decode writes (TJPF_*).
type PixelFormat int

// The pixel formats Decode offers.
const (
	// PixelRGB is 3 bytes a pixel: R, G, B.
	PixelRGB PixelFormat = 0
	// PixelRGBX is 4 bytes a pixel: R, G, B and 255, the layout of an
	// opaque image.RGBA.
	PixelRGBX PixelFormat = 2
	// PixelGray is 1 byte a pixel: luma.
	PixelGray PixelFormat = 6
)

// bytesPerPixel returns the pixel size of f, or 0 for an unknown format.
func (f PixelFormat) bytesPerPixel() int {
	switch f {
	case PixelRGB:
		return 3
	case PixelRGBX:
		return 4
	case PixelGray:
		return 1
	}
	return 0
}

// TurboJPEG constants (turbojpeg.h, stable since 2.1).
const (
	tjerrWarning    = 0     // TJERR_WARNING
	tjflagLimitScan = 32768 // TJFLAG_LIMITSCANS: refuse progressive files with over 500 scans
)

// library holds the entry points of the opened libturbojpeg.
type library struct {
	initDecompress, decompressHeader3, decompress2 uintptr
	initCompress, compress2, bufSize               uintptr
	getErrorStr2, getErrorCode, destroy            uintptr
}

func (l *library) symbols() []struct {
	dst  *uintptr
	name string
} {
	return []struct {
		dst  *uintptr
		name string
	}{
		{&l.initDecompress, "tjInitDecompress"},
		{&l.decompressHeader3, "tjDecompressHeader3"},
		{&l.decompress2, "tjDecompress2"},
		{&l.initCompress, "tjInitCompress"},
		{&l.compress2, "tjCompress2"},
		{&l.bufSize, "tjBufSize"},
		{&l.getErrorStr2, "tjGetErrorStr2"}, // 2.0
		{&l.getErrorCode, "tjGetErrorCode"}, // 2.0
		{&l.destroy, "tjDestroy"},
	}
}

// load opens the library once per process; later calls return the same result.
var load = sync.OnceValues(func() (*library, error) { return open(LibraryName) })

// Available loads the library (once) and returns nil when JPEG files can be
// decoded with it, or an error wrapping ErrUnavailable that says why not
// (library not found, a symbol missing).
func Available() error {
	_, err := load()
	return err
}

// decompressor is one TurboJPEG decompression handle, made for one call and destroyed after
// it. A handle is not reused: libjpeg keeps the Huffman and quantisation tables of every
// file a handle has read and uses them for a later file that lacks its own, so a reused
// handle would decode such a file by its history. A Motion-JPEG frame, which has no Huffman
// tables, gets the standard ones (jdhuff.c) on a fresh handle, and after a file with other
// tables failed as "bad Huffman code". Making one costs nothing next to a decode
// (bench/results/2026-12-07-code-comments.md#stagesjpegturbo).
type decompressor struct {
	lib *library
	h   uintptr
}

// newDecompressor makes a handle. The caller has locked its OS thread (for the error
// message of a failed tjInitDecompress), and destroys the handle with close.
func newDecompressor() (*decompressor, error) {
	l, err := load()
	if err != nil {
		return nil, err
	}
	h := l.call(l.initDecompress)
	if h == 0 {
		return nil, fmt.Errorf("tjInitDecompress: %s", l.errorString(0))
	}
	return &decompressor{lib: l, h: h}, nil
}

// close destroys the handle.
func (d *decompressor) close() { d.lib.call(d.lib.destroy, d.h) }

// errorString copies the message of the last failure of handle h (0: of a
// call that had no handle). The message lives in libjpeg-turbo's memory,
// per OS thread or per handle, until the next call.
func (l *library) errorString(h uintptr) string {
	p := l.call(l.getErrorStr2, h)
	if p == 0 {
		return "unknown libjpeg-turbo error"
	}
	// The library's buffer is JMSG_LENGTH_MAX (200) bytes; 1024 bounds the
	// walk should that ever change without a terminator. The uintptr is
	// reinterpreted rather than converted (which vet rightly distrusts for
	// Go memory): this is C memory, which does not move.
	s := *(*unsafe.Pointer)(unsafe.Pointer(&p))
	var b []byte
	for i := 0; i < 1024; i++ {
		c := *(*byte)(unsafe.Add(s, i))
		if c == 0 {
			break
		}
		b = append(b, c)
	}
	return string(b)
}

// failure turns a failed call on d into an error, or into nil when the
// library only warned about something harmless. It must run on the OS
// thread of the failed call.
//
// TurboJPEG 2.x's tjGetErrorCode says "warning" whenever the call warned,
// even when a fatal error followed (a truncated header warns "Premature
// end" and then fails "missing SOS marker"); the message is then the fatal
// one, which no harmless pattern matches, so the result is still an error.
func (d *decompressor) failure() error {
	msg := d.lib.errorString(d.h)
	warning := int32(uint32(d.lib.call(d.lib.getErrorCode, d.h))) == tjerrWarning
	if warning && harmless(msg) {
		return nil
	}
	return &Error{Msg: msg, Warning: warning}
}

// header reads data's header with d.
func (d *decompressor) header(data []byte) (Header, error) {
	var w, h, subsamp, cs int32
	l := d.lib
	r := l.call(l.decompressHeader3, d.h,
		uintptr(unsafe.Pointer(unsafe.SliceData(data))), uintptr(len(data)),
		uintptr(unsafe.Pointer(&w)), uintptr(unsafe.Pointer(&h)),
		uintptr(unsafe.Pointer(&subsamp)), uintptr(unsafe.Pointer(&cs)))
	if int32(uint32(r)) != 0 {
		if err := d.failure(); err != nil {
			return Header{}, err
		}
	}
	if w <= 0 || h <= 0 {
		// TurboJPEG 2.x returns success without a size when the data ends
		// (or has its EOI) before the first scan: a "tables-only" stream.
		return Header{}, fmt.Errorf("%w: no image before the end of the JPEG data", io.ErrUnexpectedEOF)
	}
	return Header{W: int(w), H: int(h), Colorspace: Colorspace(cs)}, nil
}

// DecodeHeader reads the size and colour space of a JPEG file without
// decoding it.
func DecodeHeader(data []byte) (Header, error) {
	if len(data) == 0 {
		return Header{}, errors.New("empty JPEG data")
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	d, err := newDecompressor()
	if err != nil {
		return Header{}, err
	}
	defer d.close()
	return d.header(data)
}

// ScaleDenoms are the DCT scales DecodeScaled offers, as denominators: 1/1,
// 1/2, 1/4 and 1/8. libjpeg-turbo (1.2 and newer) decodes them by scaling
// its inverse DCT, which is what makes a small decode cheap: at 1/8 each
// 8×8 block becomes one pixel from its DC coefficient alone.
var ScaleDenoms = []int{1, 2, 4, 8}

// ValidDenom reports whether denom is one of ScaleDenoms.
func ValidDenom(denom int) bool {
	for _, d := range ScaleDenoms {
		if d == denom {
			return true
		}
	}
	return false
}

// ScaledSize is the size of a w×h JPEG decoded at scale 1/denom:
// each side divided and rounded up (libjpeg's jdiv_round_up, TurboJPEG's
// TJSCALED).
func ScaledSize(w, h, denom int) (int, int) {
	return (w + denom - 1) / denom, (h + denom - 1) / denom
}

// IDCTSize is the size of the inverse DCT that libjpeg-turbo runs on the blocks of a
// component with sampling factors h×v, in a frame whose largest are hmax×vmax, at scale
// 1/denom (jdmaster.c): 8/denom for the largest components, and twice that, or more, for a
// subsampled one where it spares the upsampler the work. At 1/8 a block of size 1 becomes
// one sample from its DC coefficient alone.
func IDCTSize(hmax, vmax, h, v, denom int) int {
	scaled := 8 / denom
	size := scaled
	for size < 8 && (hmax*scaled)%(h*size*2) == 0 && (vmax*scaled)%(v*size*2) == 0 {
		size *= 2
	}
	return size
}

// tjFactors are TurboJPEG's scaling factors (num/den), largest first, as tjDecompress2 tries them.
var tjFactors = [...][2]int{{2, 1}, {15, 8}, {7, 4}, {13, 8}, {3, 2}, {11, 8}, {5, 4}, {9, 8},
	{1, 1}, {7, 8}, {3, 4}, {5, 8}, {1, 2}, {3, 8}, {1, 4}, {1, 8}}

// AppliedDenom is the DCT scale at which DecodeScaled(data, pix, denom, ...) decodes a w×h
// JPEG, as a denominator, and false when that scale is none of ScaleDenoms. tjDecompress2
// takes the largest of its factors whose result fits in ScaledSize(w, h, denom): that is
// 1/denom except on sides of a few pixels, where a larger factor rounds to the same size (a
// 2×3 JPEG at 1/8 decodes at 1/4, to the same 1×1; a 5×5 one at 1/4 decodes at 3/8).
func AppliedDenom(w, h, denom int) (int, bool) {
	tw, th := ScaledSize(w, h, denom)
	for _, f := range tjFactors {
		if (w*f[0]+f[1]-1)/f[1] > tw || (h*f[0]+f[1]-1)/f[1] > th {
			continue
		}
		if f[0] == 1 && ValidDenom(f[1]) {
			return f[1], true
		}
		return 0, false
	}
	return 0, false // never: 1/8 fits in any ScaledSize of a ScaleDenom
}

// Decode decodes a JPEG file at full size; it is DecodeScaled with denom 1.
func Decode(data, pix []byte, w, h, stride int, f PixelFormat) error {
	return DecodeScaled(data, pix, 1, w, h, stride, f)
}

// DecodeScaled decodes a JPEG file at scale 1/denom (see ScaleDenoms) into
// pix in pixel format f: row y is the w*bytes-per-pixel bytes from
// pix[y*stride]. Bytes between rows are left alone. w and h must be the
// file's size at that scale (ScaledSize of DecodeHeader's) and pix must hold
// the last row; all are checked before anything is decoded, so a wrong size
// is an error rather than a write out of bounds. pix may be any memory,
// including page-locked memory from outside the Go heap.
//
// A file libjpeg-turbo decodes only with a fatal error, or a warning about
// corrupt or missing data, is an error (see the package doc); pix may then
// hold part of the image.
func DecodeScaled(data, pix []byte, denom, w, h, stride int, f PixelFormat) error {
	bpp := f.bytesPerPixel()
	switch {
	case bpp == 0:
		return fmt.Errorf("unknown pixel format %d", int(f))
	case !ValidDenom(denom):
		return fmt.Errorf("scale 1/%d is not one of 1/1, 1/2, 1/4, 1/8", denom)
	case len(data) == 0:
		return errors.New("empty JPEG data")
	case w <= 0 || h <= 0 || w > math.MaxInt32/bpp || h > math.MaxInt32:
		return fmt.Errorf("size %dx%d is out of range", w, h)
	}
	if err := checkRows(pix, w, h, stride, bpp); err != nil {
		return err
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	d, err := newDecompressor()
	if err != nil {
		return err
	}
	defer d.close()
	return d.decode(data, pix, denom, w, h, stride, f)
}

// checkRows checks that pix holds h rows of w pixels of bpp bytes, stride bytes apart (w and h
// positive): the layout that DecodeScaled writes and Encode reads.
func checkRows(pix []byte, w, h, stride, bpp int) error {
	switch need := int64(h-1)*int64(stride) + int64(w*bpp); {
	case stride < w*bpp || stride > math.MaxInt32:
		return fmt.Errorf("stride %d for a row of %d bytes", stride, w*bpp)
	case int64(len(pix)) < need:
		return fmt.Errorf("buffer holds %d bytes, a %dx%d image of %d-byte pixels with stride %d needs %d",
			len(pix), w, h, bpp, stride, need)
	}
	return nil
}

// decode is DecodeScaled on d.
func (d *decompressor) decode(data, pix []byte, denom, w, h, stride int, f PixelFormat) error {
	hd, err := d.header(data)
	if err != nil {
		return err
	}
	// tjDecompress2 picks the largest of its scaling factors (M/8) whose
	// result fits in w×h; a size other than the file's at this scale would
	// quietly give another picture. With w×h the 1/denom size, the factor is
	// 1/denom, except on sides of a few pixels where a larger one rounds to
	// the same size: either way exactly w×h is written.
	if sw, sh := ScaledSize(hd.W, hd.H, denom); sw != w || sh != h {
		if denom == 1 {
			return fmt.Errorf("JPEG is %dx%d, not %dx%d", hd.W, hd.H, w, h)
		}
		return fmt.Errorf("JPEG is %dx%d, %dx%d at 1/%d, not %dx%d", hd.W, hd.H, sw, sh, denom, w, h)
	}
	if !hd.Colorspace.DecodesToRGB() {
		return fmt.Errorf("libjpeg-turbo cannot decode %v JPEG to RGB", hd.Colorspace)
	}
	l := d.lib
	r := l.call(l.decompress2, d.h,
		uintptr(unsafe.Pointer(unsafe.SliceData(data))), uintptr(len(data)),
		uintptr(unsafe.Pointer(unsafe.SliceData(pix))),
		uintptr(w), uintptr(stride), uintptr(h), uintptr(f), tjflagLimitScan)
	if int32(uint32(r)) != 0 {
		return d.failure()
	}
	return nil
}
