package stages

import (
	"math/rand"
	"strings"
	"testing"
)

// The geometry stages on every test shape (1×1, odd sizes, C = 1 and 3,
// poisoned strides), against naive per-pixel references of their doc
// comments.

func TestFlipRotate(t *testing.T) {
	forShapes(t, func(t *testing.T, rng *rand.Rand, s shape, c int) {
		src := randImage(rng, s.w, s.h, c, s.pad)
		for _, axis := range []Axis{FlipH, FlipV} {
			dst := newPadded(s.w, s.h, c, s.pad+1)
			Flip(dst, src, axis)
			want := NewImage(s.w, s.h, c)
			for y := range s.h {
				for x := range s.w {
					sx, sy := s.w-1-x, y
					if axis == FlipV {
						sx, sy = x, s.h-1-y
					}
					copy(want.Pix[y*want.Stride+x*c:][:c], src.Pix[sy*src.Stride+sx*c:][:c])
				}
			}
			sameImage(t, dst, want)
			checkPadding(t, dst)
		}
		for _, angle := range []int{90, 180, 270} {
			sh := RotateShape(src.Shape(), angle)
			dst := newPadded(sh.W, sh.H, c, s.pad+2)
			Rotate(dst, src, angle)
			want := NewImage(sh.W, sh.H, c)
			for y := range sh.H {
				for x := range sh.W {
					sx, sy := y, s.h-1-x
					switch angle {
					case 180:
						sx, sy = s.w-1-x, s.h-1-y
					case 270:
						sx, sy = s.w-1-y, x
					}
					copy(want.Pix[y*want.Stride+x*c:][:c], src.Pix[sy*src.Stride+sx*c:][:c])
				}
			}
			sameImage(t, dst, want)
			checkPadding(t, dst)
		}
		checkPadding(t, src)
	})
}

func TestCrop(t *testing.T) {
	specs := []CropSpec{{}, {X: 1, Y: 2, Width: 3, Height: 4}, {X: 500, Y: 500}, {Width: 5, Height: 5, Gravity: Center},
		{Width: 2, Gravity: Southeast}, {Height: 3, Gravity: North}, {Width: 7, Height: 1, Gravity: West}}
	forShapes(t, func(t *testing.T, rng *rand.Rand, s shape, c int) {
		src := randImage(rng, s.w, s.h, c, s.pad)
		for _, spec := range specs {
			x0, y0, cw, ch := spec.Rect(s.w, s.h)
			if x0 < 0 || y0 < 0 || cw < 1 || ch < 1 || x0+cw > s.w || y0+ch > s.h {
				t.Fatalf("%+v.Rect(%d, %d) = %d %d %d %d: not inside the image", spec, s.w, s.h, x0, y0, cw, ch)
			}
			dst := newPadded(cw, ch, c, s.pad+1)
			Crop(dst, src, x0, y0)
			want := NewImage(cw, ch, c)
			for y := range ch {
				for x := range cw {
					copy(want.Pix[y*want.Stride+x*c:][:c], src.Pix[(y0+y)*src.Stride+(x0+x)*c:][:c])
				}
			}
			sameImage(t, dst, want)
			checkPadding(t, dst)
		}
	})
}

func TestCropRect(t *testing.T) {
	tests := []struct {
		spec         CropSpec
		w, h         int
		x, y, cw, ch int
	}{
		{CropSpec{}, 10, 8, 0, 0, 10, 8},
		{CropSpec{X: 3, Y: 2}, 10, 8, 3, 2, 7, 6},
		{CropSpec{X: 3, Y: 2, Width: 4, Height: 100}, 10, 8, 3, 2, 4, 6},
		{CropSpec{X: 30, Y: 20}, 10, 8, 9, 7, 1, 1},
		{CropSpec{Width: 5, Height: 3, Gravity: Center}, 10, 8, 2, 2, 5, 3},
		{CropSpec{Width: 4, Height: 4, Gravity: Center}, 9, 9, 2, 2, 4, 4}, // (9-4)/2 rounds down
		{CropSpec{Width: 5, Height: 3, Gravity: Southeast}, 10, 8, 5, 5, 5, 3},
		{CropSpec{Width: 5, Gravity: South}, 10, 8, 2, 0, 5, 8},
		{CropSpec{Width: 50, Height: 3, Gravity: Northeast}, 10, 8, 0, 0, 10, 3},
		{CropSpec{Height: 3, Gravity: Southwest}, 10, 8, 0, 5, 10, 3},
	}
	for _, tc := range tests {
		x, y, cw, ch := tc.spec.Rect(tc.w, tc.h)
		if x != tc.x || y != tc.y || cw != tc.cw || ch != tc.ch {
			t.Errorf("%+v.Rect(%d, %d) = %d %d %d %d, want %d %d %d %d", tc.spec, tc.w, tc.h, x, y, cw, ch, tc.x, tc.y, tc.cw, tc.ch)
		}
	}
}

func TestGeometrySpecErrors(t *testing.T) {
	tests := []struct {
		err  error
		want string
	}{
		{CropSpec{X: -1}.Check(), "negative"},
		{CropSpec{X: 2, Gravity: Center}.Check(), "either x, y or gravity=center"},
		{CropSpec{Gravity: "up"}.Check(), `unknown gravity "up"`},
		{CropSpec{X: 2, Gravity: Northwest}.Check(), ""},
		{ResizeSpec{Fit: FitExact, Filter: FilterArea}.Check(), "give width, height or both"},
		{ResizeSpec{Width: -1, Fit: FitExact, Filter: FilterArea}.Check(), "must be in [0, 16384]"},
		{ResizeSpec{Width: MaxResizeSide + 1, Fit: FitExact, Filter: FilterArea}.Check(), "must be in [0, 16384]"},
		{ResizeSpec{Width: 3, Fit: "fill", Filter: FilterArea}.Check(), `unknown fit "fill"`},
		{ResizeSpec{Width: 3, Fit: FitCover, Filter: "cubic"}.Check(), `unknown filter "cubic"`},
		{ResizeSpec{Height: 3, Fit: FitCover, Filter: FilterLinear}.Check(), ""},
	}
	for i, tc := range tests {
		switch {
		case tc.want == "" && tc.err != nil:
			t.Errorf("case %d: %v", i, tc.err)
		case tc.want != "" && (tc.err == nil || !strings.Contains(tc.err.Error(), tc.want)):
			t.Errorf("case %d: error %v, want %q", i, tc.err, tc.want)
		}
	}
	for _, f := range []func(){
		func() { CropSpec{X: -1}.Rect(3, 3) },
		func() { Crop(NewImage(3, 3, 1), NewImage(3, 3, 1), 1, 0) },
		func() { Flip(NewImage(3, 3, 1), NewImage(3, 3, 1), "d") },
		func() { Rotate(NewImage(3, 3, 1), NewImage(3, 3, 1), 45) },
		func() {
			Resize(NewImage(3, 3, 1), NewImage(3, 3, 1), ResizeSpec{Width: 4, Fit: FitExact, Filter: FilterArea})
		},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Error("a bad call did not panic")
				}
			}()
			f()
		}()
	}
}

func TestResizeAxes(t *testing.T) {
	tests := []struct {
		spec   ResizeSpec
		w, h   int
		ax, ay ResizeAxis
	}{
		{ResizeSpec{Width: 256, Height: 256, Fit: FitInside}, 4000, 3000, ResizeAxis{4000, 256, 0, 256}, ResizeAxis{3000, 192, 0, 192}},
		{ResizeSpec{Width: 256, Height: 256, Fit: FitInside}, 3000, 4000, ResizeAxis{3000, 192, 0, 192}, ResizeAxis{4000, 256, 0, 256}},
		{ResizeSpec{Width: 256, Height: 256, Fit: FitInside}, 2, 5000, ResizeAxis{2, 1, 0, 1}, ResizeAxis{5000, 256, 0, 256}},
		{ResizeSpec{Width: 100, Height: 100, Fit: FitCover}, 400, 300, ResizeAxis{400, 133, 16, 100}, ResizeAxis{300, 100, 0, 100}},
		{ResizeSpec{Width: 100, Height: 50, Fit: FitExact}, 7, 9, ResizeAxis{7, 100, 0, 100}, ResizeAxis{9, 50, 0, 50}},
		{ResizeSpec{Width: 10, Fit: FitCover}, 4, 3, ResizeAxis{4, 10, 0, 10}, ResizeAxis{3, 8, 0, 8}}, // 7.5 rounds up
		{ResizeSpec{Height: 5000}, 1, 1, ResizeAxis{1, 5000, 0, 5000}, ResizeAxis{1, 5000, 0, 5000}},
		{ResizeSpec{Height: 5000}, 1000, 1, ResizeAxis{1000, MaxResizeSide, 0, MaxResizeSide}, ResizeAxis{1, 5000, 0, 5000}},
	}
	for _, tc := range tests {
		ax, ay := tc.spec.Axes(tc.w, tc.h)
		if ax != tc.ax || ay != tc.ay {
			t.Errorf("%+v.Axes(%d, %d) = %+v %+v, want %+v %+v", tc.spec, tc.w, tc.h, ax, ay, tc.ax, tc.ay)
		}
	}
}

// TestResize checks every filter on every test shape against a naive
// evaluation of the definition (per output sample, straight from the taps),
// and that taps sum to 2^14 with windows inside the image.
func TestResize(t *testing.T) {
	outs := [][2]int{{1, 1}, {3, 7}, {40, 2}, {13, 13}}
	forShapes(t, func(t *testing.T, rng *rand.Rand, s shape, c int) {
		src := randImage(rng, s.w, s.h, c, s.pad)
		for _, f := range []Filter{FilterArea, FilterLinear, FilterLanczos3} {
			for _, fit := range []Fit{FitExact, FitInside, FitCover} {
				for _, o := range outs {
					spec := ResizeSpec{Width: o[0], Height: o[1], Fit: fit, Filter: f}
					sh := spec.Shape(src.Shape())
					dst := newPadded(sh.W, sh.H, c, s.pad+3)
					Resize(dst, src, spec)
					sameImage(t, dst, refResize(t, src, spec))
					checkPadding(t, dst)
				}
			}
		}
	})
}

func refResize(t *testing.T, src *Image, spec ResizeSpec) *Image {
	ax, ay := spec.Axes(src.W, src.H)
	wx, wy := ax.Weights(spec.Filter), ay.Weights(spec.Filter)
	for _, w := range []*AxisWeights{wx, wy} {
		for i := range w.First {
			sum := int32(0)
			for _, v := range w.Taps[w.Start[i]:][:w.Count[i]] {
				sum += v
			}
			if sum != ResizeOne || w.First[i] < 0 || w.Count[i] < 1 {
				t.Fatalf("%+v: output %d: taps sum to %d, window %d+%d", spec, i, sum, w.First[i], w.Count[i])
			}
		}
	}
	c := src.C
	out := NewImage(ax.Out, ay.Out, c)
	for y := range ay.Out {
		for x := range ax.Out {
			for ch := range c {
				var v int64
				for k := range int(wy.Count[y]) {
					sy := int(wy.First[y]) + k
					var h int32
					for j := range int(wx.Count[x]) {
						h += wx.Taps[int(wx.Start[x])+j] * int32(at(src, int(wx.First[x])+j, sy, ch))
					}
					h = min(max(h, 0), 255<<14)
					v += int64(wy.Taps[int(wy.Start[y])+k]) * int64((h+32)>>6)
				}
				out.Pix[y*out.Stride+x*c+ch] = byte(min(max((v+1<<21)>>22, 0), 255))
			}
		}
	}
	return out
}
