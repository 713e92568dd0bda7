package stages

import (
	"fmt"
	"math"
	"sync"
)

// Fit says how `resize` fits an image into width×height.
type Fit string

// The fits. Exact stretches to width×height; Inside keeps the aspect ratio
// and stays within the box (the thumbnail mode); Cover keeps the aspect ratio,
// covers the box and crops the excess, centred, so the output is exactly
// width×height.
const (
	FitExact  Fit = "exact"
	FitInside Fit = "inside"
	FitCover  Fit = "cover"
)

// Filter is the resampling filter of `resize`.
type Filter string

// The filters: Area averages the source area each output pixel covers
// (OpenCV INTER_AREA when shrinking), Linear interpolates between the two
// nearest source pixels with half-pixel centres (OpenCV INTER_LINEAR; no
// antialiasing), Lanczos3 is the windowed sinc of Pillow's LANCZOS, widened by
// the scale when shrinking.
const (
	FilterArea     Filter = "area"
	FilterLinear   Filter = "linear"
	FilterLanczos3 Filter = "lanczos3"
)

// Resize limits.
const (
	// MaxResizeSide bounds each side of a resize's output (and so its
	// memory: at most 16384² RGB pixels); a side derived from the aspect
	// ratio is clamped to it too.
	MaxResizeSide = 16384
	// maxScaled bounds the scaled side before a cover crop, which is never
	// allocated, so that every product of the weight arithmetic fits int64.
	maxScaled = 1 << 24
	// MaxResizeWork bounds a resize's multiply-adds (ResizeSpec.Work). Real
	// resizes stay far below it (100 MP to 16384×16384 with lanczos3 takes
	// about 8·10^9); an extreme change of aspect ratio asks far more of a tiny
	// image (1×1,000,000 to 16384×1: 10^11, minutes of one core).
	MaxResizeWork = 1 << 34
	// ResizeOne is the fixed-point one of the taps: they sum to 2^14.
	ResizeOne = 1 << 14
	// LanczosSteps is how many samples per unit of distance the Lanczos
	// table holds (LanczosTable).
	LanczosSteps = 256
	// lanczosFrac is the number of fractional bits of a table position.
	lanczosFrac = 8
)

// ResizeSpec is what `resize` asks for. A 0 side is derived from the other
// and the aspect ratio.
type ResizeSpec struct {
	Width, Height int
	Fit           Fit
	Filter        Filter
}

// Check reports a spec that can never be applied.
func (s ResizeSpec) Check() error {
	switch {
	case s.Width < 0 || s.Height < 0 || s.Width > MaxResizeSide || s.Height > MaxResizeSide:
		return fmt.Errorf("resize %dx%d: each side must be in [0, %d]", s.Width, s.Height, MaxResizeSide)
	case s.Width == 0 && s.Height == 0:
		return fmt.Errorf("resize: give width, height or both")
	case s.Fit != FitExact && s.Fit != FitInside && s.Fit != FitCover:
		return fmt.Errorf("resize: unknown fit %q", string(s.Fit))
	case s.Filter != FilterArea && s.Filter != FilterLinear && s.Filter != FilterLanczos3:
		return fmt.Errorf("resize: unknown filter %q", string(s.Filter))
	}
	return nil
}

// Work returns the multiply-adds Resize does on an image of shape in: the
// source rows that the windows read, each filtered across the output width,
// then each output row summed over its window.
func (s ResizeSpec) Work(in Shape) int64 {
	ax, ay := s.Axes(in.W, in.H)
	rows, ty := ay.span(s.Filter)
	_, tx := ax.span(s.Filter)
	return (rows*tx + ty*int64(ax.Out)) * int64(in.C)
}

// CheckWork refuses a resize of an image of shape in that would do more than
// MaxResizeWork multiply-adds; a caller checks it before decoding the image.
func (s ResizeSpec) CheckWork(in Shape) error {
	if w := s.Work(in); w > MaxResizeWork {
		ax, ay := s.Axes(in.W, in.H)
		return fmt.Errorf("%dx%d to %dx%d would take %.3g multiply-adds, over the limit of %.3g (an extreme change of aspect ratio)",
			in.W, in.H, ax.Out, ay.Out, float64(w), float64(MaxResizeWork))
	}
	return nil
}

// span returns how many source pixels the axis's windows cover together, and
// the sum of their sizes (the taps).
func (a ResizeAxis) span(f Filter) (covered, taps int64) {
	first, last := a.In, 0
	for i := range a.Out {
		lo, hi := a.Window(f, i)
		first, last, taps = min(first, lo), max(last, hi), taps+int64(hi-lo)
	}
	return int64(max(last-first, 0)), taps
}

// ResizeAxis maps one axis of a resize: the source's In pixels are scaled to
// Scaled pixels, of which the output keeps Out starting at Off (Off > 0 only
// for a cover crop). Output pixel i samples scaled pixel u = i + Off, whose
// centre lies at source coordinate (u + ½)·In/Scaled (half-pixel centres).
type ResizeAxis struct {
	In, Scaled, Off, Out int
}

// roundDiv is a/b rounded half up, for a ≥ 0, b > 0.
func roundDiv(a, b int64) int64 { return (2*a + b) / (2 * b) }

// floorDiv is ⌊a/b⌋ for b > 0.
func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && a < 0 {
		q--
	}
	return q
}

// Axes returns how a w×h image is resized, axis by axis:
//
//   - One side given: it is taken as is, the other is round(other·given/side)
//     (halves up), at least 1 and at most MaxResizeSide. Fit does not matter.
//   - exact: the output is Width×Height.
//   - inside: the side whose ratio target/source is smaller is taken as is,
//     the other derived as above (so it is within the box).
//   - cover: the side whose ratio is larger is taken as is, the other derived
//     (so it covers the box, capped at 2^24), then the middle Width×Height is
//     kept: Off = (Scaled − Out) / 2, rounded down.
//
// Ratios are compared exactly (Width·h against Height·w); on a tie the width
// is taken as is.
func (s ResizeSpec) Axes(w, h int) (x, y ResizeAxis) {
	derive := func(other, given, side, limit int) int {
		return int(min(max(roundDiv(int64(other)*int64(given), int64(side)), 1), int64(limit)))
	}
	tw, th := s.Width, s.Height
	sw, sh := tw, th
	switch {
	case th == 0:
		sh = derive(h, tw, w, MaxResizeSide)
		th = sh
	case tw == 0:
		sw = derive(w, th, h, MaxResizeSide)
		tw = sw
	case s.Fit == FitInside:
		if int64(tw)*int64(h) <= int64(th)*int64(w) {
			sh = derive(h, tw, w, MaxResizeSide)
		} else {
			sw = derive(w, th, h, MaxResizeSide)
		}
		tw, th = sw, sh
	case s.Fit == FitCover:
		if int64(tw)*int64(h) >= int64(th)*int64(w) {
			sh = max(th, derive(h, tw, w, maxScaled))
		} else {
			sw = max(tw, derive(w, th, h, maxScaled))
		}
	}
	return ResizeAxis{In: w, Scaled: sw, Off: (sw - tw) / 2, Out: tw},
		ResizeAxis{In: h, Scaled: sh, Off: (sh - th) / 2, Out: th}
}

// Shape is the output shape of the resize for an input of shape in.
func (s ResizeSpec) Shape(in Shape) Shape {
	x, y := s.Axes(in.W, in.H)
	return Shape{W: x.Out, H: y.Out, C: in.C}
}

var (
	lanczosOnce sync.Once
	lanczosTab  []int32
)

// LanczosTable returns the Lanczos-3 kernel L(t) = sinc(t)·sinc(t/3)
// sampled at t = k/LanczosSteps for k = 0 … 3·LanczosSteps, each
// round(L·2^14) (float64, halves away from zero), with L(0) = 2^14 and zero
// at the integers. It is computed once; the GPU receives the same integers.
// The caller must not modify it.
func LanczosTable() []int32 {
	lanczosOnce.Do(func() {
		lanczosTab = make([]int32, 3*LanczosSteps+1)
		for k := range lanczosTab {
			lanczosTab[k] = int32(math.Round(lanczos3(float64(k)/LanczosSteps) * ResizeOne))
		}
	})
	return lanczosTab
}

func lanczos3(t float64) float64 {
	if t == 0 {
		return 1
	}
	if t >= 3 {
		return 0
	}
	sinc := func(x float64) float64 { return math.Sin(math.Pi*x) / (math.Pi * x) }
	return sinc(t) * sinc(t/3)
}

// AxisWeights are the integer taps of one axis: output pixel i reads source
// pixels First[i] … First[i]+Count[i]−1 with weights Taps[Start[i]:][:Count[i]].
// The taps of each output pixel sum to ResizeOne.
type AxisWeights struct {
	First, Count, Start []int32
	Taps                []int32
}

// Window returns the source pixels [lo, hi) that output pixel i of the axis
// reads with filter f, already cut to [0, In):
//
//   - area: the pixels that overlap its footprint [u·In, (u+1)·In) (units of
//     1/Scaled), lo = ⌊u·In/Scaled⌋, hi = ⌈(u+1)·In/Scaled⌉;
//   - linear: with num = (2u+1)·In − Scaled (the centre minus ½, in units of
//     1/(2·Scaled)), lo = ⌊num/(2·Scaled)⌋, hi = lo+2;
//   - lanczos3: every j with |D_j| < 3Q, where D_j = (2j+1)·Scaled −
//     (2u+1)·In is the distance from the centre and Q = 2·max(In, Scaled)
//     is the kernel's unit (t = D_j/Q), the scale when shrinking.
func (a ResizeAxis) Window(f Filter, i int) (lo, hi int) {
	n, S, u := int64(a.In), int64(a.Scaled), int64(i+a.Off)
	var l, h int64
	switch f {
	case FilterArea:
		l, h = u*n/S, ((u+1)*n+S-1)/S
	case FilterLinear:
		l = floorDiv((2*u+1)*n-S, 2*S)
		h = l + 2
	default:
		q3, c2 := 3*2*max(n, S), (2*u+1)*n
		l = floorDiv(c2-q3-S, 2*S) + 1
		h = -floorDiv(-(c2 + q3 - S), 2*S) // ⌈(c2+3Q−S)/(2S)⌉
	}
	return int(max(l, 0)), int(min(h, n))
}

// Raw returns the unnormalised weight of source pixel j for output pixel i:
//
//   - area: the overlap min((u+1)·In, (j+1)·Scaled) − max(u·In, j·Scaled);
//   - linear: 2·Scaled − frac for lo and frac for lo+1, where
//     frac = num − 2·Scaled·lo;
//   - lanczos3: the table position a = (|D_j|·⌊2^56/Q⌋) >> 40 (|D_j|/Q in
//     units of 1/(256·LanczosSteps), by a reciprocal so the GPU needs no
//     division per tap), k = a>>8, r = a&255: L[k]·(256−r) + L[k+1]·r, L from
//     LanczosTable (linear interpolation in the table, in integers).
func (a ResizeAxis) Raw(f Filter, i, j int, lt []int32) int64 {
	n, S, u, jj := int64(a.In), int64(a.Scaled), int64(i+a.Off), int64(j)
	switch f {
	case FilterArea:
		return min((u+1)*n, (jj+1)*S) - max(u*n, jj*S)
	case FilterLinear:
		num := (2*u+1)*n - S
		lo := floorDiv(num, 2*S)
		frac := num - 2*S*lo
		if jj == lo {
			return 2*S - frac
		}
		return frac
	}
	d := (2*jj+1)*S - (2*u+1)*n
	if d < 0 {
		d = -d
	}
	p := d * ((1 << 56) / (2 * max(n, S))) >> 40
	k, r := p>>lanczosFrac, p&(1<<lanczosFrac-1)
	return int64(lt[k])*(1<<lanczosFrac-r) + int64(lt[k+1])*r
}

// Weights returns the axis's integer taps for filter f. For each output
// pixel, with the raw weights R_j of its window and their sum Σ (always
// positive: the window holds the source pixel nearest the centre, which is
// within the kernel's positive main lobe), w_j = (R_j·⌊2^46/Σ⌋ + 2^31) >> 32
// (R_j/Σ·2^14 rounded, by a reciprocal so the GPU needs no division per tap),
// then the tap with the largest R_j (the first of equals) gets 2^14 − Σw
// added, so the taps sum to 2^14 exactly.
func (a ResizeAxis) Weights(f Filter) *AxisWeights {
	lt := LanczosTable()
	w := &AxisWeights{First: make([]int32, a.Out), Count: make([]int32, a.Out), Start: make([]int32, a.Out)}
	for i := range a.Out {
		lo, hi := a.Window(f, i)
		w.First[i], w.Count[i], w.Start[i] = int32(lo), int32(hi-lo), int32(len(w.Taps))
		var sum, best int64
		arg := lo
		for j := lo; j < hi; j++ {
			r := a.Raw(f, i, j, lt)
			sum += r
			if j == lo || r > best {
				best, arg = r, j
			}
		}
		m := (int64(1) << 46) / max(sum, 1)
		total := int64(0)
		for j := lo; j < hi; j++ {
			t := (a.Raw(f, i, j, lt)*m + 1<<31) >> 32
			w.Taps = append(w.Taps, int32(t))
			total += t
		}
		w.Taps[int(w.Start[i])+arg-lo] += int32(ResizeOne - total)
	}
	return w
}

// Resize limits of the intermediate, as blur's (docs/semantics.md#blur): a horizontal sum h is
// clamped to [0, 255·2^14] and stored as h16 = (h+32)>>6.
const resizeHMax = 255 * ResizeOne

// resizeScratch is one Resize call's working memory, pooled: filtered source rows (h16,
// with rows viewing a window of them) and vertical sums (acc).
type resizeScratch struct {
	h16  []uint16
	rows [][]uint16
	acc  []int64
}

var resizePool = sync.Pool{New: func() any { return new(resizeScratch) }}

// Resize resamples src into dst (of spec.Shape's shape), separably:
//
//	horizontal: h = Σ wx_j·p(j, y) (int32), clamped to [0, 255·2^14],
//	            stored as h16 = (h + 32) >> 6
//	vertical:   v = Σ wy_k·h16(x, k) (int64), out = clamp((v + 2^21) >> 22, 0, 255)
//
// with the taps of ResizeAxis.Weights (>> is the arithmetic shift, rounding
// towards −∞). Windows are cut to the image and their taps renormalised, so
// no pixel outside the image is read. It panics if dst's shape is wrong.
func Resize(dst, src *Image, spec ResizeSpec) {
	mustValid("Resize", "src", src)
	ax, ay := spec.Axes(src.W, src.H)
	mustBe("Resize", "dst", dst, ax.Out, ay.Out, src.C)
	wx, wy := ax.Weights(spec.Filter), ay.Weights(spec.Filter)
	s := resizePool.Get().(*resizeScratch)
	defer resizePool.Put(s)
	// The working set stays small whatever the sizes: a ring of the filtered rows that one
	// output row's window spans (few when enlarging), or the sums of the output rows that
	// one source row feeds (few when shrinking), whichever takes fewer bytes. Both add the
	// same exact integers, so they give the same bytes.
	n := ax.Out * src.C
	if ring, live := wy.maxCount(), wy.maxLive(); ring*2 <= live*8 {
		resizePull(dst, src, wx, wy, n, ring, s)
	} else {
		resizePush(dst, src, wx, wy, n, live, s)
	}
}

// resizePull makes each output row from the filtered source rows of its window, which a
// ring of ring rows holds: windows only move down (ResizeAxis.Window), so a row leaves
// the ring once no later window reads it.
func resizePull(dst, src *Image, wx, wy *AxisWeights, n, ring int, s *resizeScratch) {
	s.h16 = grow(s.h16, ring*n)
	s.acc = grow(s.acc, n)
	row := func(y int) []uint16 { return s.h16[(y%ring)*n:][:n] }
	next := 0 // the first source row not filtered yet
	for i := range wy.First {
		f, k0, cnt := int(wy.First[i]), int(wy.Start[i]), int(wy.Count[i])
		for next = max(next, f); next < f+cnt; next++ {
			resizeRow(row(next), src.Row(next), wx, src.C)
		}
		s.rows = grow(s.rows, cnt)
		for k := range s.rows {
			s.rows[k] = row(f + k)
		}
		resizeColumns(dst.Row(i)[:n], s.rows, wy.Taps[k0:k0+cnt], s.acc)
	}
}

// resizeColumns is the vertical pass of one output row: out[x] from the rows of h16
// that its window covers, one per tap. Two rows are added per pass over acc, which
// halves its loads and stores; the sums are exact integers, so their order does not
// change the result.
func resizeColumns(out []uint8, rows [][]uint16, taps []int32, acc []int64) {
	clear(acc)
	k := 0
	for ; k+1 < len(taps); k += 2 {
		w0, w1 := int64(taps[k]), int64(taps[k+1])
		r0, r1 := rows[k][:len(acc)], rows[k+1][:len(acc)]
		for x := range acc {
			acc[x] += w0*int64(r0[x]) + w1*int64(r1[x])
		}
	}
	if k < len(taps) {
		addRow(acc, rows[k], int64(taps[k]))
	}
	roundSums(out, acc)
}

// resizePush filters each source row that a window reads once and adds it into the sums
// of the output rows whose windows hold it, live of them at most, in a ring; an output
// row is rounded into dst once the rows of its window are in.
func resizePush(dst, src *Image, wx, wy *AxisWeights, n, live int, s *resizeScratch) {
	s.h16 = grow(s.h16, n)
	s.acc = grow(s.acc, live*n)
	sums := func(i int) []int64 { return s.acc[(i%live)*n:][:n] }
	wy.walk(func(y, lo, next int) {
		read := false
		for i := lo; i < next; i++ {
			k := y - int(wy.First[i])
			if k >= int(wy.Count[i]) {
				continue
			}
			if k == 0 {
				clear(sums(i))
			}
			if !read {
				resizeRow(s.h16, src.Row(y), wx, src.C)
				read = true
			}
			addRow(sums(i), s.h16, int64(wy.Taps[int(wy.Start[i])+k]))
		}
	}, func(i int) { roundSums(dst.Row(i)[:n], sums(i)) })
}

// walk visits the source rows from the first window's, in order, as resizePush sums
// them: for row y the output rows [lo, next) are live (a window starts at its First
// row), and done(i) follows, in order, for each output row whose window ended with y.
func (w *AxisWeights) walk(row func(y, lo, next int), done func(i int)) {
	out := len(w.First)
	lo, next := 0, 0
	for y := int(w.First[0]); lo < out; y++ {
		for next < out && int(w.First[next]) <= y {
			next++
		}
		row(y, lo, next)
		for lo < next && int(w.First[lo]+w.Count[lo]) <= y+1 {
			done(lo)
			lo++
		}
	}
}

// maxLive is the most output rows resizePush sums at once.
func (w *AxisWeights) maxLive() int {
	most := 1
	w.walk(func(_, lo, next int) { most = max(most, next-lo) }, func(int) {})
	return most
}

// maxCount is the largest window: the rows resizePull's ring holds.
func (w *AxisWeights) maxCount() int {
	most := 1
	for _, c := range w.Count {
		most = max(most, int(c))
	}
	return most
}

// addRow adds w·h into acc.
func addRow(acc []int64, h []uint16, w int64) {
	for x, v := range h[:len(acc)] {
		acc[x] += w * int64(v)
	}
}

// roundSums rounds vertical sums into output pixels.
func roundSums(out []uint8, acc []int64) {
	for x, v := range acc {
		out[x] = uint8(min(max((v+1<<21)>>22, 0), 255))
	}
}

// resizeRow is the horizontal pass of one source row into h16. Images have 1 or 3
// channels (Image.Check).
func resizeRow(out []uint16, in []byte, w *AxisWeights, c int) {
	if c == 3 {
		resizeRow3(out, in, w)
	} else {
		resizeRow1(out, in, w)
	}
}

// resizeRow3 is resizeRow for RGB: the three channels share each tap. It takes two
// taps a round, which made BenchmarkResize's full-size lanczos3 thumbnail (where this
// pass is most of the time) 1.5× as fast as one tap a round.
func resizeRow3(out []uint16, in []byte, w *AxisWeights) {
	for i := range w.First {
		k0, cnt := int(w.Start[i]), int(w.Count[i])
		taps := w.Taps[k0 : k0+cnt]
		p := in[3*int(w.First[i]):][:3*cnt]
		var r, g, b int32
		k := 0
		for ; k+1 < cnt; k += 2 {
			t0, t1 := taps[k], taps[k+1]
			q := p[3*k : 3*k+6 : 3*k+6]
			r += t0*int32(q[0]) + t1*int32(q[3])
			g += t0*int32(q[1]) + t1*int32(q[4])
			b += t0*int32(q[2]) + t1*int32(q[5])
		}
		if k < cnt {
			t, q := taps[k], p[3*k:3*k+3:3*k+3]
			r += t * int32(q[0])
			g += t * int32(q[1])
			b += t * int32(q[2])
		}
		o := out[3*i:][:3:3]
		o[0], o[1], o[2] = h16(r), h16(g), h16(b)
	}
}

// resizeRow1 is resizeRow for gray, two taps a round as resizeRow3.
func resizeRow1(out []uint16, in []byte, w *AxisWeights) {
	for i := range w.First {
		k0, cnt := int(w.Start[i]), int(w.Count[i])
		taps := w.Taps[k0 : k0+cnt]
		p := in[int(w.First[i]):][:cnt]
		var h int32
		k := 0
		for ; k+1 < cnt; k += 2 {
			h += taps[k]*int32(p[k]) + taps[k+1]*int32(p[k+1])
		}
		if k < cnt {
			h += taps[k] * int32(p[k])
		}
		out[i] = h16(h)
	}
}

// h16 is a horizontal sum clamped to [0, resizeHMax] and stored in 16 bits.
func h16(h int32) uint16 { return uint16((min(max(h, 0), resizeHMax) + 32) >> 6) }

// ResizeArgs are resize's launch arguments: the spec, which the launcher resolves for each
// image (ResizeSpec.Axes).
type ResizeArgs struct{ Spec ResizeSpec }

// LaunchStage names the stage whose GPU launcher reads these arguments (sched.LaunchArgs).
func (ResizeArgs) LaunchStage() string { return "resize" }
