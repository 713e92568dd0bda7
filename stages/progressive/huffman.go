package progressive

import "encoding/binary"

// fastBits is how many leading bits of the stream a decTable's lookup takes at once.
const fastBits = 10

// decTable is one Huffman table of a DHT segment, ready to decode with.
type decTable struct {
	fast    [1 << fastBits]uint16 // for each fastBits-bit prefix: length<<8 | symbol of the code it starts with, when that code is no longer; 0 otherwise
	maxCode [17]int32             // maxCode[l]: the largest code of length l, -1 when there is none
	valOff  [17]int32             // valOff[l]: index in vals of the first code of length l, minus that code
	vals    [256]uint8
}

// build makes t from a DHT table's code counts (bits[l], l = 1..16) and symbols as libjpeg's
// jpeg_make_d_derived_tbl does, with its checks: false where it refuses the table (more than
// 256 codes, lengths that overfill the code space, a DC symbol over 15) or the table has no
// code at all.
func (t *decTable) build(bits *[17]uint8, vals []uint8, dc bool) bool {
	*t = decTable{}
	var codes [256]int32
	n, code := 0, int32(0)
	for l := 1; l <= 16; l++ {
		for range int(bits[l]) {
			if n == 256 {
				return false
			}
			codes[n] = code
			n++
			code++
		}
		if code >= 1<<l { // no code may be all ones
			return false
		}
		code <<= 1
	}
	if n == 0 || n > len(vals) {
		return false
	}
	copy(t.vals[:], vals[:n])
	if dc {
		for _, v := range vals[:n] {
			if v > 15 {
				return false
			}
		}
	}
	p := 0
	for l := 1; l <= 16; l++ {
		c := int(bits[l])
		t.maxCode[l] = -1
		if c == 0 {
			continue
		}
		t.valOff[l] = int32(p) - codes[p]
		for i := p; i < p+c && l <= fastBits; i++ {
			e := uint16(l)<<8 | uint16(vals[i])
			lo := int(codes[i]) << (fastBits - l)
			for k := lo; k < lo+1<<(fastBits-l); k++ {
				t.fast[k] = e
			}
		}
		p += c
		t.maxCode[l] = codes[p-1]
	}
	return true
}

// bitReader reads the unstuffed entropy-coded bytes of one restart interval, most
// significant bit first.
type bitReader struct {
	buf []byte // the interval's bytes, then 8 zero bytes
	end int    // the number of the interval's own bytes
	pos int    // the next byte of buf to load (past its end: the zeros that follow)
	acc uint64 // the next n bits of the stream at its top
	n   uint
}

func (r *bitReader) reset(buf []byte, end int) {
	*r = bitReader{buf: buf, end: end}
}

// fill loads whole bytes into acc, at least 56 bits' worth.
func (r *bitReader) fill() {
	k := (63 - r.n) >> 3
	if r.pos+8 > len(r.buf) {
		// Beyond the data and its padding: more zeros, as libjpeg feeds there (exact
		// reports it when they are read).
		r.pos += int(k)
		r.n += k << 3
		return
	}
	// The bits of w below the bytes taken are the stream's next ones, which the next fill
	// ORs in again: acc holds the stream's bits below n too, or zeros.
	w := binary.BigEndian.Uint64(r.buf[r.pos:])
	r.acc |= w >> (r.n & 63)
	r.pos += int(k)
	r.n += k << 3
}

// bits returns the next s bits (s <= 16) as an unsigned number.
func (r *bitReader) bits(s uint) int32 {
	if r.n < s {
		r.fill()
	}
	v := int32(r.acc >> (64 - s)) // 0 for s = 0
	r.acc <<= s
	r.n -= s
	return v
}

// bit returns the next bit.
func (r *bitReader) bit() bool {
	if r.n == 0 {
		r.fill()
	}
	b := r.acc>>63 != 0
	r.acc <<= 1
	r.n--
	return b
}

// decode returns the next symbol of t, and false for a code that t does not have (libjpeg:
// "Corrupt JPEG data: bad Huffman code").
func (r *bitReader) decode(t *decTable) (int, bool) {
	if r.n < 16 {
		r.fill()
	}
	if e := t.fast[r.acc>>(64-fastBits)]; e != 0 {
		l := uint(e >> 8)
		r.acc <<= l
		r.n -= l
		return int(e & 0xff), true
	}
	for l := uint(fastBits + 1); l <= 16; l++ {
		if code := int32(r.acc >> (64 - l)); code <= t.maxCode[l] {
			r.acc <<= l
			r.n -= l
			return int(t.vals[t.valOff[l]+code]), true
		}
	}
	return 0, false
}

// extend makes the s-bit number v (s >= 1) the signed value JPEG codes with it (HUFF_EXTEND).
func extend(v int32, s uint) int32 {
	if v < 1<<(s-1) {
		return v - 1<<s + 1
	}
	return v
}

// exact reports whether the interval's bits were read to within its last byte: not beyond
// its bytes (libjpeg would pad with zeros and warn of a premature end), and not leaving a
// whole byte unread (libjpeg would warn of extraneous bytes, or could read them as the next
// blocks').
func (r *bitReader) exact() bool {
	used := 8*r.pos - int(r.n)
	return used <= 8*r.end && used > 8*(r.end-1)
}

// encTable is a Huffman table to write with: each symbol's code and its length.
type encTable struct {
	code [256]uint16
	size [256]uint8
}

// newEncTable makes the encoding table of a DHT table's code counts and symbols.
func newEncTable(bits *[17]uint8, vals []uint8) *encTable {
	t := new(encTable)
	code, k := uint16(0), 0
	for l := 1; l <= 16; l++ {
		for range int(bits[l]) {
			t.code[vals[k]], t.size[vals[k]] = code, uint8(l)
			code++
			k++
		}
		code <<= 1
	}
	return t
}

// bitWriter appends a byte-stuffed entropy-coded segment to buf.
type bitWriter struct {
	buf []byte
	acc uint64 // pending bits at the bottom
	n   uint
}

// put writes the low size bits of v (size <= 32).
func (w *bitWriter) put(v uint32, size uint) {
	w.acc = w.acc<<size | uint64(v)
	if w.n += size; w.n >= 32 {
		w.n -= 32
		word := uint32(w.acc >> w.n)
		// A word without a 0xFF byte goes out whole; otherwise byte by byte, stuffed.
		if x := ^word; (x-0x01010101)&^x&0x80808080 == 0 {
			w.buf = append(w.buf, byte(word>>24), byte(word>>16), byte(word>>8), byte(word))
			return
		}
		for sh := 24; sh >= 0; sh -= 8 {
			if b := byte(word >> sh); b != 0xff {
				w.buf = append(w.buf, b)
			} else {
				w.buf = append(w.buf, 0xff, 0)
			}
		}
	}
}

// flush writes the pending bits, the last byte padded with 1 bits.
func (w *bitWriter) flush() {
	if pad := (8 - w.n%8) % 8; pad > 0 {
		w.acc, w.n = w.acc<<pad|(1<<pad-1), w.n+pad
	}
	for ; w.n >= 8; w.n -= 8 {
		if b := byte(w.acc >> (w.n - 8)); b != 0xff {
			w.buf = append(w.buf, b)
		} else {
			w.buf = append(w.buf, 0xff, 0)
		}
	}
}
