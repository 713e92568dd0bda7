package stages

import "encoding/binary"

// transposeTile is the side of the square tiles Transpose copies: a tile's
// source and destination rows stay in L1 while it is copied.
const transposeTile = 64

// Transpose writes src transposed into dst (H×W, same C): dst(x, y) =
// src(y, x). It panics if the shapes do not match.
func Transpose(dst, src *Image) {
	mustValid("Transpose", "src", src)
	mustBe("Transpose", "dst", dst, src.H, src.W, src.C)
	for y0 := 0; y0 < src.H; y0 += transposeTile {
		y1 := min(y0+transposeTile, src.H)
		for x0 := 0; x0 < src.W; x0 += transposeTile {
			x1 := min(x0+transposeTile, src.W)
			if src.C == 1 {
				transposeTile1(dst, src, x0, x1, y0, y1)
			} else {
				transposeTile3(dst, src, x0, x1, y0, y1)
			}
		}
	}
}

// transposeTile1 copies source columns x0..x1-1 of rows y0..y1-1 (C = 1): 8×8 blocks
// through transpose8, the ragged right and bottom edges byte by byte.
func transposeTile1(dst, src *Image, x0, x1, y0, y1 int) {
	xe, ye := x0+(x1-x0)&^7, y0+(y1-y0)&^7
	for y := y0; y < ye; y += 8 {
		for x := x0; x < xe; x += 8 {
			transpose8(dst, src, x, y)
		}
	}
	transposeBytes(dst, src, xe, x1, y0, y1)
	transposeBytes(dst, src, x0, xe, ye, y1)
}

// transpose8 transposes the 8×8 block of a C = 1 image at (x, y) as eight 64-bit rows
// (byte k of a little-endian row word is column k): three rounds swap 1-, 2- and 4-byte
// units between rows 1, 2 and 4 apart. Written out so that the rows stay in registers.
func transpose8(dst, src *Image, x, y int) {
	le := binary.LittleEndian
	p, ss := src.Pix[y*src.Stride+x:], src.Stride
	_ = p[7*ss+7]
	r0, r1, r2, r3 := le.Uint64(p), le.Uint64(p[ss:]), le.Uint64(p[2*ss:]), le.Uint64(p[3*ss:])
	r4, r5, r6, r7 := le.Uint64(p[4*ss:]), le.Uint64(p[5*ss:]), le.Uint64(p[6*ss:]), le.Uint64(p[7*ss:])
	swap := func(a, b *uint64, shift uint, mask uint64) {
		t := (*a>>shift ^ *b) & mask
		*b ^= t
		*a ^= t << shift
	}
	const m1, m2, m4 = 0x00FF00FF00FF00FF, 0x0000FFFF0000FFFF, 0x00000000FFFFFFFF
	swap(&r0, &r1, 8, m1)
	swap(&r2, &r3, 8, m1)
	swap(&r4, &r5, 8, m1)
	swap(&r6, &r7, 8, m1)
	swap(&r0, &r2, 16, m2)
	swap(&r1, &r3, 16, m2)
	swap(&r4, &r6, 16, m2)
	swap(&r5, &r7, 16, m2)
	swap(&r0, &r4, 32, m4)
	swap(&r1, &r5, 32, m4)
	swap(&r2, &r6, 32, m4)
	swap(&r3, &r7, 32, m4)
	q, ds := dst.Pix[x*dst.Stride+y:], dst.Stride
	_ = q[7*ds+7]
	le.PutUint64(q, r0)
	le.PutUint64(q[ds:], r1)
	le.PutUint64(q[2*ds:], r2)
	le.PutUint64(q[3*ds:], r3)
	le.PutUint64(q[4*ds:], r4)
	le.PutUint64(q[5*ds:], r5)
	le.PutUint64(q[6*ds:], r6)
	le.PutUint64(q[7*ds:], r7)
}

// transposeBytes copies source columns x0..x1-1 of rows y0..y1-1 (C = 1) byte by byte.
func transposeBytes(dst, src *Image, x0, x1, y0, y1 int) {
	for x := x0; x < x1; x++ {
		out := dst.Pix[x*dst.Stride+y0 : x*dst.Stride+y1]
		off := y0*src.Stride + x
		for i := range out {
			out[i] = src.Pix[off]
			off += src.Stride
		}
	}
}

// transposeTile3 is transposeTile1 for C = 3.
func transposeTile3(dst, src *Image, x0, x1, y0, y1 int) {
	for x := x0; x < x1; x++ {
		out := dst.Pix[x*dst.Stride+3*y0 : x*dst.Stride+3*y1]
		off := y0*src.Stride + 3*x
		for i := 0; i < len(out); i += 3 {
			p := src.Pix[off : off+3 : off+3]
			o := out[i : i+3 : i+3]
			o[0], o[1], o[2] = p[0], p[1], p[2]
			off += src.Stride
		}
	}
}
