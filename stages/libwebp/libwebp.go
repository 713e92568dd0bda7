// Package libwebp encodes WebP images with libwebp (Debian package libwebp7,
// libwebp.so.7), loaded at run time through dynlib and purego, so imgpipe
// builds with CGO_ENABLED=0 and runs without the library everywhere except
// where WebP output is asked for.
//
// Only libwebp's simple encoding API is used (WebPEncodeRGB,
// WebPEncodeLosslessRGB, WebPFree): it takes interleaved 8-bit RGB rows with
// any stride, which is imgpipe's image layout.
package libwebp

import (
	"errors"
	"fmt"
	"sync"
	"unsafe"

	"github.com/ebitengine/purego"

	"github.com/imgpipe/imgpipe/dynlib"
)

// MaxDimension is libwebp's limit on a side (WEBP_MAX_DIMENSION).
const MaxDimension = 16383

// ErrUnavailable is matched (errors.Is) by the error of Available and Encode
// when libwebp cannot be loaded.
var ErrUnavailable = errors.New("libwebp unavailable")

// Spec is how the library is found: IMGPIPE_LIBWEBP overrides the search.
var Spec = dynlib.Spec{
	Name:    "libwebp",
	Env:     "IMGPIPE_LIBWEBP",
	Sonames: []string{"libwebp.so.7"},
	Hint:    "install libwebp (Debian: apt-get install libwebp7) for save format=webp",
}

// library holds libwebp's entry points, bound with purego (which passes the
// float quality in a floating-point register, as the C ABI wants).
type library struct {
	path           string
	encodeRGB      func(rgb unsafe.Pointer, w, h, stride int32, quality float32, out *unsafe.Pointer) uintptr
	encodeLossless func(rgb unsafe.Pointer, w, h, stride int32, out *unsafe.Pointer) uintptr
	free           func(p unsafe.Pointer)
}

// load opens the library once per process; later calls return the same result.
var load = sync.OnceValues(func() (*library, error) { return open(Spec) })

// Available loads libwebp (once) and returns nil when it can encode, or an
// error wrapping ErrUnavailable that says why not.
func Available() error {
	_, err := load()
	return err
}

// Path is the library that was loaded ("" when none was).
func Path() string {
	if l, err := load(); err == nil {
		return l.path
	}
	return ""
}

// Options are the encoder's settings.
type Options struct {
	// Quality is the lossy quality 1..100 (libwebp's quality_factor);
	// ignored when Lossless is set.
	Quality int
	// Lossless selects WebP's lossless mode: the decoded pixels are exactly
	// the encoded ones.
	Lossless bool
}

// ErrTooLarge is the error for a w×h image that WebP cannot hold.
func ErrTooLarge(w, h int) error {
	return fmt.Errorf("webp: image is %dx%d, want 1..%d on each side", w, h, MaxDimension)
}

// Encode compresses w×h interleaved 8-bit RGB pixels (row y at pix[y*stride:])
// into a WebP file.
func Encode(pix []byte, w, h, stride int, opt Options) ([]byte, error) {
	switch {
	case w < 1 || h < 1 || w > MaxDimension || h > MaxDimension:
		return nil, ErrTooLarge(w, h)
	case stride < 3*w || len(pix) < (h-1)*stride+3*w:
		return nil, fmt.Errorf("webp: %d bytes with stride %d do not hold %dx%d RGB pixels", len(pix), stride, w, h)
	case !opt.Lossless && (opt.Quality < 1 || opt.Quality > 100):
		return nil, fmt.Errorf("webp: quality %d is not in 1..100", opt.Quality)
	}
	l, err := load()
	if err != nil {
		return nil, err
	}
	var out unsafe.Pointer
	var n uintptr
	if opt.Lossless {
		n = l.encodeLossless(unsafe.Pointer(&pix[0]), int32(w), int32(h), int32(stride), &out)
	} else {
		n = l.encodeRGB(unsafe.Pointer(&pix[0]), int32(w), int32(h), int32(stride), float32(opt.Quality), &out)
	}
	if out == nil {
		return nil, fmt.Errorf("webp: libwebp could not encode the %dx%d image (out of memory?)", w, h)
	}
	defer l.free(out)
	if n == 0 {
		return nil, fmt.Errorf("webp: libwebp could not encode the %dx%d image", w, h)
	}
	return append([]byte(nil), unsafe.Slice((*byte)(out), n)...), nil
}

// open finds the library spec describes and binds the entry points. It is
// separate from load so that tests can open a wrong library.
func open(spec dynlib.Spec) (*library, error) {
	lib, err := dynlib.Open(spec)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	l := &library{path: lib.Path}
	for _, s := range []struct {
		fn   any
		name string
	}{
		{&l.encodeRGB, "WebPEncodeRGB"},
		{&l.encodeLossless, "WebPEncodeLosslessRGB"},
		{&l.free, "WebPFree"}, // libwebp 1.0
	} {
		sym, err := lib.Sym(s.name)
		if err != nil {
			return nil, fmt.Errorf("%w: %v (libwebp 1.0 or newer is needed)", ErrUnavailable, err)
		}
		purego.RegisterFunc(s.fn, sym)
	}
	return l, nil
}
