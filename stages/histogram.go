package stages

// Histogram counts src's values (C = 1) or luma (C = 3, the Grayscale
// formula) into h, which it zeroes first. It panics on an invalid image.
func Histogram(h *[256]uint64, src *Image) {
	mustValid("Histogram", "src", src)
	// Four interleaved sub-histograms: runs of equal values (common in real
	// images) would otherwise serialise on one counter's load-add-store.
	var sub [4][256]uint64
	for y := 0; y < src.H; y++ {
		in := src.Row(y)
		if src.C == 1 {
			x := 0
			for ; x+4 <= len(in); x += 4 {
				p := in[x : x+4 : x+4]
				sub[0][p[0]]++
				sub[1][p[1]]++
				sub[2][p[2]]++
				sub[3][p[3]]++
			}
			for ; x < len(in); x++ {
				sub[0][in[x]]++
			}
			continue
		}
		x := 0
		for ; x+12 <= len(in); x += 12 {
			p := in[x : x+12 : x+12]
			sub[0][luma(p[0], p[1], p[2])]++
			sub[1][luma(p[3], p[4], p[5])]++
			sub[2][luma(p[6], p[7], p[8])]++
			sub[3][luma(p[9], p[10], p[11])]++
		}
		for ; x+3 <= len(in); x += 3 {
			sub[0][luma(in[x], in[x+1], in[x+2])]++
		}
	}
	for i := range h {
		h[i] = sub[0][i] + sub[1][i] + sub[2][i] + sub[3][i]
	}
}
