package stages

// TEMPORARY: signatures agreed between helpers; the stages helper replaces this file.

import (
	"errors"
	"io"
)

var errTODO = errors.New("not implemented yet")

// DefaultMaxPixels is decode's default pixel limit (100 MP).
const DefaultMaxPixels = 100_000_000

// DecodeOptions controls Decode.
type DecodeOptions struct {
	MaxPixels int64 // refuse images with W*H above this; 0 means DefaultMaxPixels
	Orient    bool  // apply the JPEG EXIF orientation
}

// Alloc returns a w×h image with c channels for the decoder to fill.
type Alloc func(w, h, c int) (*Image, error)

// Decode decodes an encoded image into RGB (C = 3) pixels in memory from alloc (nil: NewImage).
func Decode(data []byte, opt DecodeOptions, alloc Alloc) (*Image, error) { return nil, errTODO }

// Grayscale writes Y of src into dst (C = 1, same W×H).
func Grayscale(dst, src *Image) {}

// BlurTaps returns the 2r+1 integer taps of DESIGN.md for sigma.
func BlurTaps(sigma float64) []uint32 { return nil }

// Blur applies the separable integer Gaussian with taps; dst has src's shape.
func Blur(dst, src *Image, taps []uint32) {}

// BoxBlur applies the (2r+1)² mean; dst has src's shape.
func BoxBlur(dst, src *Image, radius int) {}

// Transpose writes src transposed into dst (H×W, same C).
func Transpose(dst, src *Image) {}

// Histogram counts src's values (C = 1) or luma (C = 3) into h, which it zeroes first.
func Histogram(h *[256]uint64, src *Image) {}

// SaveOptions controls Encode.
type SaveOptions struct {
	Format  string // "png" or "jpeg"
	Quality int    // JPEG quality 1..100
}

// Encode writes m to w in opt's format.
func Encode(w io.Writer, m *Image, opt SaveOptions) error { return errTODO }

// WriteFileAtomic writes path through a temporary file in the same folder, fsyncs it and renames it.
func WriteFileAtomic(path string, write func(io.Writer) error) error { return errTODO }
