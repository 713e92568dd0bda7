package stages

import (
	"bytes"
	"fmt"
	"strings"
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
	jpegSegments(data, func(m byte, seg []byte, _, _ int) bool {
		if stop(&f) {
			return false
		}
		switch {
		case isSOF(m):
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

// jpegSegments calls fn, in order, for each marker segment of a JPEG (data starts with SOI)
// up to EOI: m is its marker, seg what follows its length, and data[at:end] the whole
// segment, with a scan's entropy-coded data for SOS. Fill bytes and markers without a length
// between segments are passed over, as libjpeg does. It stops early when fn returns false,
// and reports whether it reached EOI: false as well where the structure breaks (no marker
// where one must be, a length that runs past the data).
func jpegSegments(data []byte, fn func(m byte, seg []byte, at, end int) bool) (eoi bool) {
	i := 2
	for i+2 <= len(data) {
		if data[i] != 0xff {
			return false
		}
		m := data[i+1]
		switch {
		case m == 0xff: // fill byte
			i++
			continue
		case m == 0xd9: // EOI
			return true
		case m == 0x01 || m >= 0xd0 && m <= 0xd8: // no length
			i += 2
			continue
		}
		if i+4 > len(data) {
			return false
		}
		n := int(data[i+2])<<8 | int(data[i+3])
		if n < 2 || i+2+n > len(data) {
			return false
		}
		end := i + 2 + n
		if m == 0xda {
			end = skipEntropy(data, end)
		}
		if !fn(m, data[i+4:i+2+n], i, end) {
			return false
		}
		i = end
	}
	return false
}

// isSOF reports whether m is a frame header's marker (SOF0-15 but DHT, JPG and DAC).
func isSOF(m byte) bool { return m >= 0xc0 && m <= 0xcf && m != 0xc4 && m != 0xc8 && m != 0xcc }

// skipEntropy returns the offset of the first marker at or after i that is not inside
// entropy-coded data (0xFF 0x00 stuffing and restart markers are part of it).
func skipEntropy(data []byte, i int) int {
	for i+1 < len(data) {
		// Only an 0xFF can start a marker: jumping from one to the next keeps this walk over
		// every byte of the scans a small part of a decode (it was a quarter of a GPU run's
		// CPU time, byte by byte).
		k := bytes.IndexByte(data[i:len(data)-1], 0xff)
		if k < 0 {
			break
		}
		i += k
		if m := data[i+1]; m != 0 && (m < 0xd0 || m > 0xd7) && m != 0xff {
			return i
		}
		i++
	}
	return len(data)
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
