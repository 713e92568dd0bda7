package stages

import "encoding/binary"

// jpegOrientation returns the EXIF orientation (1..8) of a JPEG file, or 1
// when it has none or the metadata cannot be read. Broken metadata is not an
// error: the pixels may still decode, and upright is the safe default.
//
// It walks the marker segments before the first scan and reads the first
// APP1 "Exif" segment's IFD0 tag 0x0112.
func jpegOrientation(data []byte) int {
	if len(data) < 4 || data[0] != 0xFF || data[1] != 0xD8 {
		return 1
	}
	i := 2
	for i+4 <= len(data) {
		if data[i] != 0xFF {
			return 1 // not at a marker: the file is not what we can walk
		}
		m := data[i+1]
		if m == 0xFF { // fill byte before a marker
			i++
			continue
		}
		i += 2
		switch {
		case m == 0x01 || m == 0xD8 || (m >= 0xD0 && m <= 0xD7):
			continue // standalone markers carry no length
		case m == 0xDA || m == 0xD9:
			return 1 // start of scan or end of image: no metadata after this
		}
		n := int(binary.BigEndian.Uint16(data[i:]))
		if n < 2 || i+n > len(data) {
			return 1
		}
		seg := data[i+2 : i+n]
		if m == 0xE1 && len(seg) >= 6 && string(seg[:5]) == "Exif\x00" {
			return exifOrientation(seg[6:])
		}
		i += n
	}
	return 1
}

// exifOrientation reads tag 0x0112 (Orientation, SHORT) from IFD0 of the
// TIFF structure t, in either byte order. It returns 1 when the tag is
// absent or invalid.
func exifOrientation(t []byte) int {
	if len(t) < 8 {
		return 1
	}
	var bo binary.ByteOrder
	switch string(t[:4]) {
	case "II*\x00":
		bo = binary.LittleEndian
	case "MM\x00*":
		bo = binary.BigEndian
	default:
		return 1
	}
	off := uint64(bo.Uint32(t[4:]))
	if off < 8 || off+2 > uint64(len(t)) {
		return 1
	}
	count := int(bo.Uint16(t[off:]))
	p := int(off) + 2
	for k := 0; k < count && p+12 <= len(t); k++ {
		e := t[p : p+12]
		p += 12
		if bo.Uint16(e) != 0x0112 {
			continue
		}
		// Type 3 is SHORT; a count of one fits in the value field's first
		// two bytes (in the file's byte order).
		if bo.Uint16(e[2:]) != 3 || bo.Uint32(e[4:]) < 1 {
			return 1
		}
		if v := int(bo.Uint16(e[8:])); v >= 1 && v <= 8 {
			return v
		}
		return 1
	}
	return 1
}
