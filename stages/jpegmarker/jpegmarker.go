// Package jpegmarker walks the marker segments of a JPEG file, passing over each scan's
// entropy-coded data, without decoding anything.
package jpegmarker

import "bytes"

// Segments calls fn, in order, for each marker segment of a JPEG (data starts with SOI)
// up to EOI: m is its marker, seg what follows its length, and data[at:end] the whole
// segment, with a scan's entropy-coded data for SOS. Fill bytes and markers without a length
// between segments are passed over, as libjpeg does. It stops early when fn returns false,
// and reports whether it reached EOI: false as well where the structure breaks (no marker
// where one must be, a length that runs past the data).
func Segments(data []byte, fn func(m byte, seg []byte, at, end int) bool) (eoi bool) {
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
			end = SkipEntropy(data, end)
		}
		if !fn(m, data[i+4:i+2+n], i, end) {
			return false
		}
		i = end
	}
	return false
}

// IsSOF reports whether m is a frame header's marker (SOF0-15 but DHT, JPG and DAC).
func IsSOF(m byte) bool { return m >= 0xc0 && m <= 0xcf && m != 0xc4 && m != 0xc8 && m != 0xcc }

// SkipEntropy returns the offset of the first marker at or after i that is not inside
// entropy-coded data (0xFF 0x00 stuffing and restart markers are part of it).
func SkipEntropy(data []byte, i int) int {
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
