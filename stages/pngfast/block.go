package pngfast

import "encoding/binary"

// clOrder is the order in which a block header lists the code-length code's
// lengths (RFC 1951 §3.2.7).
var clOrder = [numCL]uint8{16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1, 15}

// Code-length symbols used by the run-length coding of §4 (16 is never used).
const (
	clZeros3  = 17 // 3..10 zeros, 3 extra bits
	clZeros11 = 18 // 11..138 zeros, 7 extra bits
)

// bitWriter packs deflate fields LSB first into dst. It stores eight bytes
// at a time, so up to seven bytes past pos may be written; the layout of
// Bound leaves at least that much after every block (a CRC and the next
// chunk's header, or the Adler-32 and IEND).
type bitWriter struct {
	dst  []byte
	pos  int
	bits uint64
	n    uint // valid bits in bits, < 8 after flush
}

// write adds the nb (≤ 32) low bits of v.
func (w *bitWriter) write(v uint32, nb uint) {
	w.bits |= uint64(v) << w.n
	w.n += nb
	if w.n >= 32 {
		w.flush()
	}
}

// flush stores the whole bytes.
func (w *bitWriter) flush() {
	binary.LittleEndian.PutUint64(w.dst[w.pos:], w.bits)
	k := w.n >> 3
	w.pos += int(k)
	w.bits >>= k * 8
	w.n &= 7
}

// align pads with zero bits to the next byte boundary and flushes.
func (w *bitWriter) align() {
	w.n = (w.n + 7) &^ 7
	w.flush()
}

// code writes a table entry: the reversed code and its length.
func (w *bitWriter) code(e uint32) { w.write(e&0xffff, uint(e>>16)) }

// writeBlock writes the deflate block of blk (docs/png-fast.md §2-4) at pos,
// with e.hist holding its byte counts, and returns the position after it
// (after the sync-flush marker, or after the final alignment).
func (e *encoder) writeBlock(dst []byte, pos int, blk []byte, last bool) int {
	for s := range 256 {
		e.count[s] = e.hist[0][s] + e.hist[1][s] + e.hist[2][s] + e.hist[3][s]
	}
	e.count[endOfBlock] = 1
	e.huff.lengths(e.count[:], maxLitBits, e.litL[:])
	e.lit.canonical(e.litL[:])

	// The 258 lengths (the literal/length ones, then one distance length
	// 0), run-length coded.
	var seq [numLit + 1]uint8
	copy(seq[:], e.litL[:])
	nr := 0
	e.clCnt = [numCL]uint32{}
	emit := func(sym, extra int) {
		e.rle[nr] = uint16(sym) | uint16(extra)<<8
		e.clCnt[sym]++
		nr++
	}
	for i := 0; i < len(seq); {
		if seq[i] != 0 {
			emit(int(seq[i]), 0)
			i++
			continue
		}
		r := 0
		for i+r < len(seq) && seq[i+r] == 0 {
			r++
		}
		i += r
		for r >= 11 {
			k := min(r, 138)
			emit(clZeros11, k-11)
			r -= k
		}
		if r >= 3 {
			emit(clZeros3, r-3)
			r = 0
		}
		for ; r > 0; r-- {
			emit(0, 0)
		}
	}
	e.huff.lengths(e.clCnt[:], maxCLBits, e.clL[:])
	e.cl.canonical(e.clL[:])

	w := &e.bw
	*w = bitWriter{dst: dst, pos: pos}
	final := uint32(0)
	if last {
		final = 1
	}
	w.write(final|2<<1, 3) // BFINAL, BTYPE = 2 (dynamic)
	hclen := numCL
	for hclen > 4 && e.clL[clOrder[hclen-1]] == 0 {
		hclen--
	}
	w.write(0, 5) // HLIT: 257 codes
	w.write(0, 5) // HDIST: 1 code
	w.write(uint32(hclen-4), 4)
	for _, s := range clOrder[:hclen] {
		w.write(uint32(e.clL[s]), 3)
	}
	for _, r := range e.rle[:nr] {
		sym := r & 0xff
		w.code(e.cl[sym])
		switch sym {
		case clZeros3:
			w.write(uint32(r>>8), 3)
		case clZeros11:
			w.write(uint32(r>>8), 7)
		}
	}

	e.literals(blk)
	w.code(e.lit[endOfBlock])
	if !last {
		w.write(0, 3) // an empty stored block: BFINAL = 0, BTYPE = 00
	}
	w.align()
	pos = w.pos
	if !last {
		pos += copy(dst[pos:], "\x00\x00\xff\xff")
	}
	return pos
}

// literals writes the codes of blk's bytes: the hot loop. After a flush at
// most 7 bits are pending, so three codes of up to 15 bits (or four of up to
// 14) fit the 64-bit buffer before the next eight-byte store. The header
// before it can leave up to 31 bits pending, hence the flush first.
func (e *encoder) literals(blk []byte) {
	w := &e.bw
	w.flush()
	tab := &e.lit
	dst, pos, bits, n := w.dst, w.pos, w.bits, w.n
	longest := uint8(0)
	for _, l := range e.litL[:256] {
		longest = max(longest, l)
	}
	if longest <= 14 {
		for ; len(blk) >= 4; blk = blk[4:] {
			c0, c1, c2, c3 := tab[blk[0]], tab[blk[1]], tab[blk[2]], tab[blk[3]]
			// Pairs first, then the pair of pairs: a shorter dependency
			// chain than adding the codes one after the other.
			l0, l2 := uint(c0>>16), uint(c2>>16)
			p01 := uint64(c0&0xffff) | uint64(c1&0xffff)<<l0
			p23 := uint64(c2&0xffff) | uint64(c3&0xffff)<<l2
			l01, l23 := l0+uint(c1>>16), l2+uint(c3>>16)
			bits |= (p01 | p23<<l01) << n
			n += l01 + l23
			binary.LittleEndian.PutUint64(dst[pos:], bits)
			pos += int(n >> 3)
			bits >>= n &^ 7
			n &= 7
		}
	}
	for ; len(blk) >= 3; blk = blk[3:] {
		c0, c1, c2 := tab[blk[0]], tab[blk[1]], tab[blk[2]]
		bits |= uint64(c0&0xffff) << n
		n += uint(c0 >> 16)
		bits |= uint64(c1&0xffff) << n
		n += uint(c1 >> 16)
		bits |= uint64(c2&0xffff) << n
		n += uint(c2 >> 16)
		binary.LittleEndian.PutUint64(dst[pos:], bits)
		pos += int(n >> 3)
		bits >>= n &^ 7
		n &= 7
	}
	w.pos, w.bits, w.n = pos, bits, n
	for _, b := range blk {
		w.code(tab[b])
	}
}
