package stages

import (
	"fmt"
	"image"
	"io"
	"math"

	"golang.org/x/image/tiff"
)

// encodeTIFF writes m as a baseline TIFF with golang.org/x/image/tiff: 8-bit gray for C = 1,
// and for C = 3 8-bit RGB with an opaque alpha sample (that encoder writes no 3-sample RGB;
// readers drop the alpha and get the pixels back exactly). compression is save's setting:
// PNGNoCompression stores the strips, anything else compresses them with Deflate and the
// horizontal predictor. Lossless either way.
func encodeTIFF(w io.Writer, m *Image, compression int) error {
	// TIFF offsets are 32-bit: refuse what cannot fit before making the RGBA copy.
	if int64(m.W)*int64(m.H)*4 > math.MaxUint32 {
		return fmt.Errorf("image is %dx%d, over TIFF's 4 GiB limit", m.W, m.H)
	}
	opt := &tiff.Options{Compression: tiff.Deflate, Predictor: true}
	if compression == PNGNoCompression {
		opt = &tiff.Options{Compression: tiff.Uncompressed}
	}
	rect := image.Rect(0, 0, m.W, m.H)
	if m.C == 1 {
		return tiff.Encode(w, &image.Gray{Pix: m.Pix, Stride: m.Stride, Rect: rect}, opt)
	}
	rgba := image.NewNRGBA(rect)
	for y := 0; y < m.H; y++ {
		in, out := m.Row(y), rgba.Pix[y*rgba.Stride:]
		for x := 0; x < m.W; x++ {
			out[4*x], out[4*x+1], out[4*x+2], out[4*x+3] = in[3*x], in[3*x+1], in[3*x+2], 0xff
		}
	}
	return tiff.Encode(w, rgba, opt)
}
