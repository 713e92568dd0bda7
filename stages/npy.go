package stages

import (
	"bufio"
	"io"

	"github.com/imgpipe/imgpipe/stages/npy"
)

// encodeNPY writes m as a NumPy .npy file (format version 1.0): a uint8 array of shape
// (H, W, C) in C order, C = 1 included, so that numpy.load gives the image as an ML
// framework wants it with no reshaping, and every image of a run has three axes.
func encodeNPY(w io.Writer, m *Image) error {
	bw := bufio.NewWriterSize(w, 64<<10)
	if err := npy.WriteHeader(bw, npy.Header{Descr: "|u1", Shape: []int{m.H, m.W, m.C}}); err != nil {
		return err
	}
	for y := 0; y < m.H; y++ {
		if _, err := bw.Write(m.Row(y)); err != nil {
			return err
		}
	}
	return bw.Flush()
}
