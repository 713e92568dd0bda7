package stages

import (
	"io"

	"github.com/imgpipe/imgpipe/stages/libwebp"
)

// encodeWebP writes m as WebP through libwebp (loaded at run time; an error that says how to
// install it when it is missing): lossless when opt.Lossless, else lossy at opt.Quality.
// WebP has no gray mode, so C = 1 is written as RGB with R = G = B.
func encodeWebP(w io.Writer, m *Image, opt SaveOptions) error {
	if m.W > libwebp.MaxDimension || m.H > libwebp.MaxDimension {
		// Checked before the gray image's RGB copy is allocated.
		return libwebp.ErrTooLarge(m.W, m.H)
	}
	pix, stride := m.Pix, m.Stride
	if m.C == 1 {
		stride = 3 * m.W
		pix = make([]byte, stride*m.H)
		for y := 0; y < m.H; y++ {
			out := pix[y*stride : (y+1)*stride]
			for x, v := range m.Row(y) {
				out[3*x], out[3*x+1], out[3*x+2] = v, v, v
			}
		}
	}
	data, err := libwebp.Encode(pix, m.W, m.H, stride, libwebp.Options{Quality: opt.Quality, Lossless: opt.Lossless})
	if err != nil {
		return err
	}
	_, err = w.Write(data)
	return err
}
