package stages

import (
	"math/rand"
	"strings"
	"testing"
)

// Extreme changes of aspect ratio, against the naive evaluation: they run Resize's two
// vertical strategies (a ring of filtered rows when a window is short, sums of the output
// rows a source row feeds when it is long) at their edges.
func TestResizeExtremeAspect(t *testing.T) {
	rng := rand.New(rand.NewSource(5))
	for _, tc := range []struct{ w, h, ow, oh int }{
		{1, 3000, 40, 1}, {40, 1, 1, 3000}, {2, 2000, 300, 3}, {500, 2, 2, 700}, {3, 997, 5, 31}, {7, 31, 3, 997},
	} {
		for _, c := range []int{1, 3} {
			src := randImage(rng, tc.w, tc.h, c, 2)
			for _, f := range []Filter{FilterArea, FilterLinear, FilterLanczos3} {
				spec := ResizeSpec{Width: tc.ow, Height: tc.oh, Fit: FitExact, Filter: f}
				dst := newPadded(tc.ow, tc.oh, c, 3)
				Resize(dst, src, spec)
				sameImage(t, dst, refResize(t, src, spec))
				checkPadding(t, dst)
			}
		}
	}
}

// Resize's working set is a few rows of the output's width, whatever the sizes: before,
// it held every source row a window read at the output's width (1×20000 to 4096×1: 491 MB).
func TestResizeWorkingSet(t *testing.T) {
	for _, tc := range []struct {
		in, out int // along the vertical axis
		f       Filter
	}{
		{20000, 1, FilterLanczos3}, {20000, 1, FilterArea}, {20000, 3, FilterLinear},
		{1, 20000, FilterLanczos3}, {7, 20000, FilterLanczos3}, {3000, 256, FilterLanczos3},
		{256, 3000, FilterArea}, {1000, 999, FilterLanczos3},
	} {
		wy := ResizeAxis{In: tc.in, Scaled: tc.out, Out: tc.out}.Weights(tc.f)
		// Resize keeps min(ring of maxCount uint16 rows, maxLive int64 rows).
		if rows := min(2*wy.maxCount(), 8*wy.maxLive()); rows > 64 {
			t.Errorf("%d to %d rows, %s: a working set of %d bytes per output sample of a row, want at most 64",
				tc.in, tc.out, tc.f, rows)
		}
	}
}

func TestResizeCheckWork(t *testing.T) {
	lanczos := func(w, h int) ResizeSpec {
		return ResizeSpec{Width: w, Height: h, Fit: FitExact, Filter: FilterLanczos3}
	}
	for _, tc := range []struct {
		spec ResizeSpec
		in   Shape
		ok   bool
	}{
		{lanczos(16384, 16384), Shape{10000, 10000, 3}, true}, // 100 MP to the largest output
		{lanczos(16384, 16384), Shape{100000, 1000, 3}, true}, // a 100 MP panorama stretched
		{lanczos(1, 1), Shape{10000, 10000, 3}, true},         // 100 MP to one pixel
		{ResizeSpec{Width: 256, Height: 256, Fit: FitInside, Filter: FilterLanczos3}, Shape{8000, 6000, 3}, true},
		{lanczos(16384, 1), Shape{1, 100000, 3}, true},   // 10^10: slow, but allowed
		{lanczos(16384, 1), Shape{1, 1000000, 3}, false}, // 10^11 from a 1 MP image
		{ResizeSpec{Width: 16384, Height: 16384, Fit: FitExact, Filter: FilterArea}, Shape{1, 100000000, 1}, false},
	} {
		err := tc.spec.CheckWork(tc.in)
		if (err == nil) != tc.ok || err != nil && !strings.Contains(err.Error(), "multiply-adds, over the limit") {
			t.Errorf("%+v of %v: work %.3g, %v; want ok %v", tc.spec, tc.in, float64(tc.spec.Work(tc.in)), err, tc.ok)
		}
	}
}
