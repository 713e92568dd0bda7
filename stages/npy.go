package stages

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"strings"
)

// npyAlign is the size the NumPy format pads the magic, version, length and header to, so
// that the data starts aligned (numpy.lib.format uses 64 since NumPy 1.14).
const npyAlign = 64

// encodeNPY writes m as a NumPy .npy file (format version 1.0): a uint8 array of shape
// (H, W, C) in C order, C = 1 included, so that numpy.load gives the image as an ML
// framework wants it with no reshaping, and every image of a run has three axes.
func encodeNPY(w io.Writer, m *Image) error {
	dict := fmt.Sprintf("{'descr': '|u1', 'fortran_order': False, 'shape': (%d, %d, %d), }", m.H, m.W, m.C)
	// magic (6) + version (2) + header length (2) + dict + padding + '\n' is a multiple of
	// npyAlign.
	pad := npyAlign - (10+len(dict)+1)%npyAlign
	if pad == npyAlign {
		pad = 0
	}
	header := dict + strings.Repeat(" ", pad) + "\n"
	bw := bufio.NewWriterSize(w, 64<<10)
	bw.WriteString("\x93NUMPY\x01\x00")
	binary.Write(bw, binary.LittleEndian, uint16(len(header)))
	bw.WriteString(header)
	for y := 0; y < m.H; y++ {
		if _, err := bw.Write(m.Row(y)); err != nil {
			return err
		}
	}
	return bw.Flush()
}
