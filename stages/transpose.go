package stages

// transposeTile is the side of the square tiles Transpose copies: a tile's
// source and destination rows stay in L1 while it is copied.
const transposeTile = 32

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

// transposeTile1 copies source columns x0..x1-1 of rows y0..y1-1 (C = 1).
func transposeTile1(dst, src *Image, x0, x1, y0, y1 int) {
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
