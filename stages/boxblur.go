package stages

import (
	"fmt"
	"sync"
)

// MaxBoxRadius is the largest boxblur radius (docs/semantics.md#boxblur: R <= 15).
const MaxBoxRadius = 15

// boxMagic[n] = ceil(2^32/n) turns the division by a window's pixel count n
// into a multiply and shift: floor(s/n) == s*boxMagic[n]>>32 for every sum
// s <= 255·n and n <= (2·15+1)². Why it is exact: with m = (2^32+e)/n,
// 0 <= e < n, the error term s·e/(n·2^32) stays below 1/n because
// s·e < 2^18·2^10 < 2^32. A test checks every (s, n) pair.
var boxMagic = func() (m [(2*MaxBoxRadius+1)*(2*MaxBoxRadius+1) + 1]uint64) {
	for n := 1; n < len(m); n++ {
		m[n] = (1<<32 + uint64(n) - 1) / uint64(n)
	}
	return m
}()

// boxScratch holds one BoxBlur call's working memory.
type boxScratch struct {
	ext  []byte   // one source row with zero padding
	ring []uint16 // horizontal window sums, row y in slot y % slots
	col  []uint32 // vertical running sums of ring rows for one output row
}

var boxPool = sync.Pool{New: func() any { return new(boxScratch) }}

// BoxBlur applies the (2r+1)² mean; dst has src's shape and may be src.
// Each output is floor(sum/count) over the in-bounds pixels of the window,
// per channel, so borders average fewer pixels rather than replicating.
//
// It is separable and uses running sums: a horizontal window sum per row,
// then a vertical running sum of those, so the cost per pixel does not
// depend on the radius. Integer arithmetic throughout, so it is exact. It
// panics if radius is outside 0..15 or the shapes do not match.
func BoxBlur(dst, src *Image, radius int) {
	mustValid("BoxBlur", "src", src)
	mustBe("BoxBlur", "dst", dst, src.W, src.H, src.C)
	if radius < 0 || radius > MaxBoxRadius {
		panic(fmt.Sprintf("stages.BoxBlur: radius %d is not in 0..%d", radius, MaxBoxRadius))
	}
	w, h, c, R := src.W, src.H, src.C, radius
	if R == 0 {
		for y := 0; y < h; y++ {
			copy(dst.Row(y), src.Row(y))
		}
		return
	}
	n := w * c
	slots := min(2*R+2, h)
	s := boxPool.Get().(*boxScratch)
	defer boxPool.Put(s)
	s.ext = grow(s.ext, n+(2*R+1)*c)
	s.ring = grow(s.ring, slots*n)
	s.col = grow(s.col, n)
	col := s.col
	clear(col)
	row := func(y int) []uint16 {
		o := (y % slots) * n
		return s.ring[o : o+n]
	}
	for y := 0; y <= min(R, h-1); y++ {
		r := row(y)
		boxRow(r, src.Row(y), s.ext, c, R)
		for x, v := range r[:len(col)] {
			col[x] += uint32(v)
		}
	}
	// Pixels [lo, hi) have the full 2R+1 columns in their window.
	lo := min(R, w)
	hi := max(lo, w-R)
	for y := 0; y < h; y++ {
		if y > 0 {
			// The row entering the window is filtered into the ring before
			// the one leaving it is dropped: they are 2R+1 apart, so with
			// 2R+2 ring slots the leaving row is still intact. Row y+R of
			// src is read before row y of dst is written, which is what
			// makes dst == src safe.
			in, out := y+R < h, y-R-1 >= 0
			var enter, leave []uint16
			if in {
				enter = row(y + R)[:len(col)]
				boxRow(enter, src.Row(y+R), s.ext, c, R)
			}
			if out {
				leave = row(y - R - 1)[:len(col)]
			}
			switch {
			case in && out:
				for x := range col {
					col[x] += uint32(enter[x]) - uint32(leave[x])
				}
			case in:
				for x, v := range enter {
					col[x] += uint32(v)
				}
			case out:
				for x, v := range leave {
					col[x] -= uint32(v)
				}
			}
		}
		cy := min(h-1, y+R) - max(0, y-R) + 1
		out := dst.Row(y)
		for x := 0; x < lo; x++ {
			boxDivide(out[x*c:x*c+c], col[x*c:x*c+c], boxMagic[cy*(min(w-1, x+R)-max(0, x-R)+1)])
		}
		boxDivide(out[lo*c:hi*c], col[lo*c:hi*c], boxMagic[cy*(2*R+1)])
		for x := hi; x < w; x++ {
			boxDivide(out[x*c:x*c+c], col[x*c:x*c+c], boxMagic[cy*(min(w-1, x+R)-max(0, x-R)+1)])
		}
	}
}

// boxDivide writes floor(sum/n) for each sum, given m = boxMagic[n].
func boxDivide(out []byte, sums []uint32, m uint64) {
	sums = sums[:len(out)]
	for i, s := range sums {
		out[i] = byte(uint64(s) * m >> 32)
	}
}

// boxRow writes, for every pixel and channel of one row, the sum of the
// in-bounds pixels within R columns. ext is scratch for the row with R+1
// zero pixels on the left and R on the right: zeros add nothing to a sum, so
// the running sum (add the pixel entering the window, subtract the one
// leaving it) needs no bounds tests.
func boxRow(out []uint16, in, ext []byte, c, R int) {
	n := len(in)
	lead := (R + 1) * c
	ext = ext[:lead+n+R*c]
	clear(ext[:lead])
	copy(ext[lead:], in)
	clear(ext[lead+n:])
	out = out[:n]
	// The first pixel's window is pixels 0..R.
	for ch := 0; ch < c; ch++ {
		var s uint16 // at most 31·255, so uint16 is enough
		for k := lead + ch; k <= lead+R*c+ch && k < lead+n; k += c {
			s += uint16(ext[k])
		}
		out[ch] = s
	}
	if n == c {
		return
	}
	// out[j] = out[j-c] + ext[lead+j+R*c] - ext[lead+j-(R+1)*c] for j >= c.
	cur := out[c:]
	prev := out[:len(cur)]
	enter := ext[lead+c+R*c:][:len(cur)]
	leave := ext[c:][:len(cur)]
	for i := range cur {
		cur[i] = prev[i] + uint16(enter[i]) - uint16(leave[i])
	}
}

// BoxBlurArgs are boxblur's launch arguments: the window's radius.
type BoxBlurArgs struct{ Radius int }

// LaunchStage names the stage whose GPU launcher reads these arguments (sched.LaunchArgs).
func (BoxBlurArgs) LaunchStage() string { return "boxblur" }
