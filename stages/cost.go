package stages

import (
	"errors"
	"fmt"
)

// MaxJPEGScans is the most scans a JPEG may have, as in libjpeg-turbo (its default
// scan limit): a progressive JPEG with thousands of tiny scans would otherwise keep a
// decoder busy for minutes on a file of a few hundred kilobytes.
const MaxJPEGScans = 500

// MaxJPEGPasses bounds the work of a JPEG in whole-image passes: every scan of Go's
// progressive decoder visits every block of the components it codes, so a scan over k of
// n components costs k/n of a pass. Encoders' progressive scripts take about 5 passes
// (libjpeg's default: 10 scans); 100 is far above any of them and keeps the worst file
// to about 20 times the decoding of an ordinary progressive one.
const MaxJPEGPasses = 100

// ErrTooMuchWork is returned (wrapped, with the figures) for a file whose structure
// asks for far more decoding work than its pixels need (a JPEG scan bomb).
var ErrTooMuchWork = errors.New("too much decoding work")

// workBytesPerPixel is the peak memory Go's decoders take per pixel, the RGB result
// included, measured per format on real files (TotalAlloc over one decode) and rounded up;
// WebP is set from its decoder's buffers (YCbCr or NRGBA plus the result). The figures are
// in bench/results/2026-12-07-code-comments.md#stages.
var workBytesPerPixel = map[string]int64{
	"jpeg": 8, "png": 16, "gif": 8, "bmp": 8, "tiff": 32, "webp": 12,
}

// progressiveJPEGBytesPerPixel is workBytesPerPixel for a progressive JPEG.
const progressiveJPEGBytesPerPixel = 24

// ErrFileTooLarge is returned (wrapped, with the figures) for a file far larger than
// its header's pixels could need (see MaxFileBytes).
var ErrFileTooLarge = errors.New("file too large for its pixels")

// maxBytesPerPixelInFile bounds the size of a valid file from its pixels: no format
// stores more than 8 bytes a pixel (16-bit RGBA, raw), and metadataSlack allows for
// headers, ICC profiles, EXIF and XMP.
const maxBytesPerPixelInFile = 8

// metadataSlack is the room a file may take beyond its pixels' bytes for metadata.
const metadataSlack = 16 << 20

// MaxFileBytes is the largest plausible size of a file of the given pixels: anything
// larger is padding or garbage and is refused before it is read.
func MaxFileBytes(pixels int64) int64 { return pixels*maxBytesPerPixelInFile + metadataSlack }

// Cost is what decoding a file will take, read from its first bytes.
type Cost struct {
	Header
	// Progressive is set for a progressive JPEG.
	Progressive bool
	// WorkBytes is the peak memory the decoder takes (the decoded RGB image included),
	// beside the file's bytes: Decode holds them whole, DecodeStream (for the formats
	// Streamed names) only its head and StreamBufferBytes.
	WorkBytes int64
}

// DecodeCost reads the header at the start of a file of size bytes (head is its first
// bytes, or all of it), checks it against opt's pixel limit and against size (a file far
// too large for its pixels, see MaxFileBytes, is refused), and says what decoding it will
// take. An error for a head shorter than the file may only mean that the header lies
// further on, except ErrTooLarge and ErrFileTooLarge, which are definite.
func DecodeCost(head []byte, size int64, opt DecodeOptions) (Cost, error) {
	hd, _, _, err := readHeaderSized(head, size, opt)
	if err != nil {
		return Cost{}, err
	}
	px := int64(hd.W) * int64(hd.H)
	if max := MaxFileBytes(px); size > max {
		return Cost{}, fmt.Errorf("%w: file is %d bytes, far more than a %dx%d image can take (at most %d); refused unread", ErrFileTooLarge, size, hd.W, hd.H, max)
	}
	c := Cost{Header: hd, WorkBytes: px * workBytesPerPixel[hd.Format]}
	if hd.Format == "jpeg" {
		if c.Progressive = JPEGProgressive(head); c.Progressive {
			c.WorkBytes = px * progressiveJPEGBytesPerPixel
		}
	}
	return c, nil
}
