package pngfast

import "encoding/binary"

// filterCursor produces the filtered stream F (docs/png-fast.md §1) of an
// image one block at a time, counting its bytes as it goes.
type filterCursor struct {
	pix             []byte
	w, h, c, stride int
	y, j            int // row, and index within F's row (0: the filter byte)
}

// fill writes the next len(out) bytes of F into out and counts them into
// hist, which it clears first.
func (f *filterCursor) fill(out []byte, hist *[4][256]uint32) {
	*hist = [4][256]uint32{}
	rowLen := f.w * f.c
	for len(out) > 0 {
		if f.j == 0 {
			out[0] = 1 // filter type Sub
			hist[0][1]++
			out = out[1:]
			f.j = 1
			continue
		}
		i := f.j - 1
		take := min(len(out), rowLen-i)
		row := f.pix[f.y*f.stride : f.y*f.stride+rowLen]
		subFilter(out[:take], row, i, f.c, hist)
		out = out[take:]
		if f.j += take; f.j > rowLen {
			f.j = 0
			f.y++
		}
	}
}

// lanes has the high bit of every byte of a uint64 set.
const lanes = 0x8080808080808080

// subFilter writes the Sub filter of row[i:i+len(out)] (C = c) into out and
// counts the bytes into hist. Eight bytes at a time it subtracts bytewise in
// one register (SWAR: no borrow crosses a byte), and spreads the counts over
// four tables so that equal neighbours do not wait on each other's stores.
func subFilter(out, row []byte, i, c int, hist *[4][256]uint32) {
	o := 0
	for ; i < c && o < len(out); i, o = i+1, o+1 {
		out[o] = row[i]
		hist[0][row[i]]++
	}
	for ; o+8 <= len(out); i, o = i+8, o+8 {
		x := binary.LittleEndian.Uint64(row[i:])
		y := binary.LittleEndian.Uint64(row[i-c:])
		d := ((x | lanes) - (y &^ lanes)) ^ ((x ^ ^y) & lanes)
		binary.LittleEndian.PutUint64(out[o:], d)
		hist[0][uint8(d)]++
		hist[1][uint8(d>>8)]++
		hist[2][uint8(d>>16)]++
		hist[3][uint8(d>>24)]++
		hist[0][uint8(d>>32)]++
		hist[1][uint8(d>>40)]++
		hist[2][uint8(d>>48)]++
		hist[3][uint8(d>>56)]++
	}
	for ; o < len(out); i, o = i+1, o+1 {
		v := row[i] - row[i-c]
		out[o] = v
		hist[0][v]++
	}
}

// adler32 is zlib's checksum of the filtered stream, kept across blocks.
type adler32 struct{ s1, s2 uint32 }

const (
	adlerMod = 65521
	// adlerNMax is zlib's NMAX: the most bytes before s2 could overflow
	// 32 bits, so the modulo is taken once per adlerNMax bytes.
	adlerNMax = 5552
)

func newAdler32() adler32 { return adler32{s1: 1} }

func (a adler32) sum() uint32 { return a.s2<<16 | a.s1 }

// update adds p. Eight bytes at a time, s2 grows by 8·s1 plus the bytes
// weighted 8, 7, ..., 1 and s1 by their sum: the per-byte recurrence's values
// at every eighth byte, so adlerNMax still bounds them. The weighted sums come
// from multiplying 16-bit lanes by weights placed so that the wanted dot
// product lands in the top lane (no lane overflows: 255·20 < 2^16).
func (a *adler32) update(p []byte) {
	const (
		low16 = 0x00ff00ff00ff00ff
		ones  = 0x0001000100010001
		wEven = 8<<48 | 6<<32 | 4<<16 | 2 // bytes 0, 2, 4, 6
		wOdd  = 7<<48 | 5<<32 | 3<<16 | 1 // bytes 1, 3, 5, 7
	)
	s1, s2 := a.s1, a.s2
	for len(p) > 0 {
		q := p[:min(len(p), adlerNMax)]
		p = p[len(q):]
		for ; len(q) >= 8; q = q[8:] {
			x := binary.LittleEndian.Uint64(q)
			even, odd := x&low16, (x>>8)&low16
			s2 += 8*s1 + uint32((even*wEven)>>48) + uint32((odd*wOdd)>>48)
			s1 += uint32(((even + odd) * ones) >> 48)
		}
		for _, b := range q {
			s1 += uint32(b)
			s2 += s1
		}
		s1 %= adlerMod
		s2 %= adlerMod
	}
	a.s1, a.s2 = s1, s2
}
