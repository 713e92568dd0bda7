package stages

import (
	"fmt"
	"strings"

	"github.com/imgpipe/imgpipe/stages/jpegmarker"
)

// jpegFrame is what a walk over a JPEG's markers finds.
type jpegFrame struct {
	sof        byte    // the frame header's marker (0xC0..0xCF), 0 before one is found
	components int     // in the frame (SOF)
	scans      int     // SOS markers
	passes     float64 // Σ over scans of the scan's components ÷ the frame's
}

// walkJPEG walks the markers of a JPEG (data starts with SOI) up to EOI or the end of
// data, skipping each scan's entropy-coded data. It is lenient: a broken structure ends
// the walk, and the decoder then says what is wrong. It stops early, once stop says so.
func walkJPEG(data []byte, stop func(*jpegFrame) bool) jpegFrame {
	var f jpegFrame
	jpegmarker.Segments(data, func(m byte, seg []byte, _, _ int) bool {
		if stop(&f) {
			return false
		}
		switch {
		case jpegmarker.IsSOF(m):
			f.sof = m
			if len(seg) >= 6 {
				f.components = int(seg[5])
			}
		case m == 0xda: // SOS
			f.scans++
			if len(seg) >= 1 && f.components > 0 {
				f.passes += float64(seg[0]) / float64(f.components)
			}
		}
		return true
	})
	return f
}

// JPEGProgressive reports whether the frame header found in data is progressive (SOF2, 6, 10
// or 14); false when data has none.
func JPEGProgressive(data []byte) bool {
	switch jpegSOF(data) {
	case 0xc2, 0xc6, 0xca, 0xce:
		return true
	}
	return false
}

// JPEGComponents returns the number of components in data's frame header (1 for gray, 3 for
// YCbCr, 4 for CMYK or YCCK), or 0 when data has none.
func JPEGComponents(data []byte) int {
	return walkJPEG(data, func(f *jpegFrame) bool { return f.sof != 0 }).components
}

// jpegSOF returns the marker of data's frame header (SOFn), or 0 when it has none.
func jpegSOF(data []byte) byte {
	return walkJPEG(data, func(f *jpegFrame) bool { return f.sof != 0 }).sof
}

// JPEGCoding names what a JPEG's frame header says beyond the Huffman-coded sequential
// and progressive modes that every decoder reads (SOF0-2): "arithmetic-coded", "lossless",
// "hierarchical", or several of them joined by spaces. It returns "" for those modes, and
// when data has no frame header.
func JPEGCoding(data []byte) string {
	m := jpegSOF(data)
	var words []string
	if m >= 0xc5 && m != 0xc8 && m != 0xc9 && m != 0xca && m != 0xcb { // SOF5-7, 13-15
		words = append(words, "hierarchical")
	}
	if m&3 == 3 { // SOF3, 7, 11, 15
		words = append(words, "lossless")
	}
	if m >= 0xc9 { // SOF9-15
		words = append(words, "arithmetic-coded")
	}
	return strings.Join(words, " ")
}

// checkJPEGWork refuses a JPEG whose scans would take far more decoding work than its
// pixels need (see MaxJPEGScans and MaxJPEGPasses). The walk is one cheap pass over the
// bytes, and ends as soon as a limit is passed.
func checkJPEGWork(data []byte) error {
	f := walkJPEG(data, func(f *jpegFrame) bool { return f.scans > MaxJPEGScans || f.passes > MaxJPEGPasses })
	switch {
	case f.scans > MaxJPEGScans:
		return fmt.Errorf("%w: the JPEG has over %d scans (the limit, as libjpeg-turbo's)", ErrTooMuchWork, MaxJPEGScans)
	case f.passes > MaxJPEGPasses:
		return fmt.Errorf("%w: the JPEG's scans make over %d passes over the image", ErrTooMuchWork, MaxJPEGPasses)
	}
	return nil
}
