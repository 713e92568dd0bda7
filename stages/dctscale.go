package stages

import "github.com/imgpipe/imgpipe/stages/jpegturbo"

// AutoDCTScale is the rule of `decode scale=auto` before a resize: the
// denominator d of the smallest DCT scale 1/d (of jpegturbo.ScaleDenoms)
// at which a JPEG whose header size, after orientation, is w×h can be
// decoded without the resize changing its result's size or enlarging
// anything. At 1/d the image is ScaledSize(w, h, d) = ⌈w/d⌉×⌈h/d⌉, and d is
// taken only when, for that size,
//
//   - spec gives the same output size as for w×h (Axes' Out): the aspect
//     ratio moves a little with the rounding, which could shift a side
//     derived from it by a pixel, and then d is not taken;
//   - each axis is still at least the resize's scaled size for w×h (Axes'
//     Scaled, before a cover crop), so the resize never enlarges what the
//     full decode would have shrunk: quality is kept, only the work of
//     decoding pixels that the resize would average away is saved.
//
// It returns 1 when no smaller scale qualifies (an enlargement, a resize
// to nearly the full size).
func AutoDCTScale(spec ResizeSpec, w, h int) int {
	fx, fy := spec.Axes(w, h)
	best := 1
	for _, d := range jpegturbo.ScaleDenoms {
		sw, sh := jpegturbo.ScaledSize(w, h, d)
		x, y := spec.Axes(sw, sh)
		if x.Out == fx.Out && y.Out == fy.Out && sw >= fx.Scaled && sh >= fy.Scaled {
			best = max(best, d)
		}
	}
	return best
}
