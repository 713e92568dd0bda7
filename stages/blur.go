package stages

import (
	"fmt"
	"math"
	"sync"
)

// MaxBlurSigma is the largest sigma blur accepts (docs/semantics.md#blur: 0 < S <= 32).
const MaxBlurSigma = 32

// blurOne is the fixed-point one of the taps: they sum to exactly 2^14.
const blurOne = 1 << 14

// BlurTaps returns the 2r+1 integer taps of docs/semantics.md#blur for sigma, index i+r
// holding w_i: r = max(1, ceil(3·sigma)), g_i = exp(-i²/(2·sigma²)) in
// float64, w_i = round(g_i/Σg·16384) with halves away from zero, and w_0
// absorbing 16384−Σw so that the taps sum to 16384 exactly. The GPU receives
// these same taps. It panics if sigma is not in (0, 32] (the planner checks
// the range first).
func BlurTaps(sigma float64) []uint32 {
	if !(sigma > 0 && sigma <= MaxBlurSigma) {
		panic(fmt.Sprintf("stages.BlurTaps: sigma %v is not in (0, %d]", sigma, MaxBlurSigma))
	}
	r := max(1, int(math.Ceil(3*sigma)))
	g := make([]float64, 2*r+1)
	var sum float64
	for i := -r; i <= r; i++ {
		g[i+r] = math.Exp(-float64(i*i) / (2 * sigma * sigma))
		sum += g[i+r]
	}
	taps := make([]uint32, 2*r+1)
	var total int64
	for i, v := range g {
		taps[i] = uint32(math.Round(v / sum * blurOne))
		total += int64(taps[i])
	}
	taps[r] = uint32(int64(taps[r]) + blurOne - total)
	return taps
}

// blurRadius checks that taps are a valid blur kernel (odd length, at least
// 3, symmetric, summing to 16384) and returns its radius. Blur relies on the
// symmetry (it adds the two mirrored pixels before multiplying) and on the
// sum (it is what keeps every intermediate inside uint32 and uint16).
func blurRadius(taps []uint32) int {
	n := len(taps)
	if n < 3 || n%2 == 0 {
		panic(fmt.Sprintf("stages.Blur: %d taps, want an odd number >= 3", n))
	}
	var sum uint64
	for i, t := range taps {
		if t != taps[n-1-i] {
			panic("stages.Blur: taps are not symmetric")
		}
		sum += uint64(t)
	}
	if sum != blurOne {
		panic(fmt.Sprintf("stages.Blur: taps sum to %d, want %d", sum, blurOne))
	}
	return n / 2
}

// blurScratch holds one Blur call's working memory, reused through a pool
// because the engine blurs image after image of the same size.
type blurScratch struct {
	ext  []byte   // one source row with r replicated pixels on each side
	ring []uint16 // horizontal-pass rows (h16), row y in slot y % slots
	acc  []uint32 // sums for one row, used by each pass in turn
}

var blurPool = sync.Pool{New: func() any { return new(blurScratch) }}

// Blur applies the separable integer Gaussian with taps (from BlurTaps);
// dst has src's shape and may be src itself.
//
// Horizontal pass: h = Σ w_i·p(clamp(x+i), y) as uint32, stored as
// h16 = (h+32)>>6. Vertical pass: v = Σ w_j·h16(x, clamp(y+j)), output
// (v + 2^21) >> 22. Borders replicate the edge pixels.
//
// Only 2r+1 rows of h16 are kept (a ring), so the scratch is small and stays
// in cache; each source row is filtered horizontally once, just before the
// first output row that needs it. That is also why dst may alias src: row y
// of src has been consumed before row y of dst is written.
func Blur(dst, src *Image, taps []uint32) {
	mustValid("Blur", "src", src)
	mustBe("Blur", "dst", dst, src.W, src.H, src.C)
	r := blurRadius(taps)
	w, h, c := src.W, src.H, src.C
	n := w * c
	slots := min(2*r+1, h)

	s := blurPool.Get().(*blurScratch)
	defer blurPool.Put(s)
	s.ext = grow(s.ext, (w+2*r)*c)
	s.ring = grow(s.ring, slots*n)
	s.acc = grow(s.acc, n)
	ring := s.ring
	row := func(y int) []uint16 { // h16 row y, clamped to the image
		y = min(max(y, 0), h-1)
		o := (y % slots) * n
		return ring[o : o+n]
	}

	next := 0 // the next source row to filter horizontally
	for y := 0; y < h; y++ {
		for ; next < h && next <= y+r; next++ {
			blurRow(row(next), s.acc, src.Row(next), s.ext, taps, r, c)
		}
		blurColumn(dst.Row(y), s.acc, row, y, taps, r)
	}
}

// blurRow is the horizontal pass of one row: in → out (h16). ext is
// scratch for the row padded with r replicated pixels on each side, so the
// sums need no clamping; acc is scratch for the sums.
func blurRow(out []uint16, acc []uint32, in, ext []byte, taps []uint32, r, c int) {
	n := len(in)
	rc := r * c
	ext = ext[:n+2*rc]
	copy(ext[rc:], in)
	first, last := in[:c], in[n-c:]
	for i := 0; i < rc; i += c {
		copy(ext[i:], first)
		copy(ext[rc+n+i:], last)
	}
	acc = acc[:n]
	blurSums(acc, ext[rc:rc+n], func(j int) ([]byte, []byte) {
		return ext[rc-j*c:][:n], ext[rc+j*c:][:n]
	}, taps, r)
	out = out[:len(acc)]
	for x, v := range acc {
		out[x] = uint16((v + 32) >> 6)
	}
}

// blurColumn is the vertical pass for output row y, over rows of h16 that
// sit in the cache-resident ring.
func blurColumn(out []byte, acc []uint32, row func(int) []uint16, y int, taps []uint32, r int) {
	acc = acc[:len(out)]
	blurSums(acc, row(y), func(j int) ([]uint16, []uint16) { return row(y - j), row(y + j) }, taps, r)
	for x, v := range acc {
		out[x] = uint8((v + 1<<21) >> 22)
	}
}

// blurSums sets acc[x] = Σ_j w_j·line_j[x] for the 2r+1 lines of one pass:
// centre is line 0 and pair(j) returns lines -j and +j, which share a tap.
//
// It sweeps whole lines, adding the centre and up to two mirrored pairs per
// sweep: each sweep is a branch-free, bounds-check-free loop over
// contiguous memory, several times faster than walking the taps per pixel,
// and folding several taps into one sweep saves loads and stores of acc.
func blurSums[T uint8 | uint16](acc []uint32, centre []T, pair func(j int) ([]T, []T), taps []uint32, r int) {
	if useVector {
		blurSumsVector(acc, centre, pair, taps, r)
		return
	}
	c := centre[:len(acc)]
	w0, w1 := taps[r], taps[r+1]
	a1, b1 := pair(1)
	a1, b1 = a1[:len(acc)], b1[:len(acc)]
	if r == 1 {
		for x := range acc {
			acc[x] = w0*uint32(c[x]) + w1*(uint32(a1[x])+uint32(b1[x]))
		}
		return
	}
	w2 := taps[r+2]
	a2, b2 := pair(2)
	a2, b2 = a2[:len(acc)], b2[:len(acc)]
	for x := range acc {
		acc[x] = w0*uint32(c[x]) + w1*(uint32(a1[x])+uint32(b1[x])) + w2*(uint32(a2[x])+uint32(b2[x]))
	}
	j := 3
	for ; j < r; j += 2 {
		w1, w2 := taps[r+j], taps[r+j+1]
		a1, b1 := pair(j)
		a2, b2 := pair(j + 1)
		a1, b1, a2, b2 = a1[:len(acc)], b1[:len(acc)], a2[:len(acc)], b2[:len(acc)]
		for x := range acc {
			acc[x] += w1*(uint32(a1[x])+uint32(b1[x])) + w2*(uint32(a2[x])+uint32(b2[x]))
		}
	}
	if j == r {
		w1 := taps[r+j]
		a1, b1 := pair(j)
		a1, b1 = a1[:len(acc)], b1[:len(acc)]
		for x := range acc {
			acc[x] += w1 * (uint32(a1[x]) + uint32(b1[x]))
		}
	}
}

// grow returns s resized to n elements, reusing its array when it is big
// enough. The contents are not cleared: callers overwrite what they read.
func grow[T any](s []T, n int) []T {
	if cap(s) >= n {
		return s[:n]
	}
	return make([]T, n)
}

// BlurArgs are blur's launch arguments: the integer taps of BlurTaps (2r+1 of
// them), so that the device gets exactly the CPU's integers.
type BlurArgs struct{ Taps []uint32 }

// LaunchStage names the stage whose GPU launcher reads these arguments (sched.LaunchArgs).
func (BlurArgs) LaunchStage() string { return "blur" }
