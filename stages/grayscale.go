package stages

// Luma weights of docs/semantics.md#grayscale: they sum to 32768, and with the rounding
// constant 16384 the result is bit-exact with OpenCV's cvtColor(RGB2GRAY).
const (
	lumaR     = 9798
	lumaG     = 19235
	lumaB     = 3735
	lumaRound = 16384
)

// luma is Y = (9798·R + 19235·G + 3735·B + 16384) >> 15.
func luma(r, g, b byte) byte {
	return byte((lumaR*uint32(r) + lumaG*uint32(g) + lumaB*uint32(b) + lumaRound) >> 15)
}

// Grayscale writes Y of src into dst (C = 1, same W×H). On C = 1 input it
// copies. It panics if the shapes do not match.
func Grayscale(dst, src *Image) {
	mustValid("Grayscale", "src", src)
	mustBe("Grayscale", "dst", dst, src.W, src.H, 1)
	for y := 0; y < src.H; y++ {
		out := dst.Row(y)
		if src.C == 1 {
			copy(out, src.Row(y))
			continue
		}
		in := src.Row(y)
		in = in[:3*len(out)]
		n := 0
		if useVector {
			n = len(out) &^ 15 // the vector kernel takes groups of 16
		}
		if n > 0 {
			grayRGB(&out[0], &in[0], n)
		}
		for x := n; x < len(out); x++ {
			p := in[3*x : 3*x+3 : 3*x+3]
			out[x] = luma(p[0], p[1], p[2])
		}
	}
}
