package pipeline

import (
	"fmt"

	"github.com/imgpipe/imgpipe/stages"
)

// The geometry stages: resize, crop, flip, rotate. Their exact semantics are the doc
// comments of stages.ResizeSpec.Axes, stages.ResizeAxis.Weights, stages.Resize,
// stages.CropSpec.Rect, stages.Flip and stages.Rotate, and docs/geometry.md.

// Stage names of the geometry stages.
const (
	stageResize = "resize"
	stageCrop   = "crop"
	stageFlip   = "flip"
	stageRotate = "rotate"
)

var resizeDef = &StageDef{
	Name: stageResize,
	Kind: PixelKind,
	Help: "scale to width×height (fit exact, inside or cover) with area, linear or lanczos3",
	Doc: `Separable resampling with integer taps summing to 16384 (per output pixel: the first
source pixel and its taps), so CPU and GPU give the same bits; see docs/geometry.md.
A 0 side is derived from the other and the aspect ratio, rounded half up (at least 1).
fit=inside keeps the aspect ratio within the box (the thumbnail mode), fit=cover covers
the box and keeps its centred width×height. Filters: area (OpenCV INTER_AREA when
shrinking, within ±1), linear (OpenCV INTER_LINEAR, half-pixel centres, within ±1),
lanczos3 (Pillow LANCZOS, widened by the scale when shrinking, within ±1 measured).` +
		fmt.Sprintf(`
An image whose resize would take over %.2g multiply-adds (an extreme change of aspect
ratio, as 1×1,000,000 to 16384×1) fails with that reason before it is decoded.`, float64(stages.MaxResizeWork)),
	Params: []ParamSpec{
		{Name: "width", Kind: Int, Default: int64(0), Range: &Range{Min: 0, Max: stages.MaxResizeSide},
			Help: "output width (0: from height and the aspect ratio)"},
		{Name: "height", Kind: Int, Default: int64(0), Range: &Range{Min: 0, Max: stages.MaxResizeSide},
			Help: "output height (0: from width and the aspect ratio)"},
		{Name: "fit", Kind: Enum, Default: string(stages.FitExact),
			Values: []string{string(stages.FitExact), string(stages.FitInside), string(stages.FitCover)},
			Help:   "exact stretches; inside fits in the box; cover fills it and crops the centre"},
		{Name: "filter", Kind: Enum, Default: string(stages.FilterLanczos3),
			Values: []string{string(stages.FilterArea), string(stages.FilterLinear), string(stages.FilterLanczos3)},
			Help:   "area (box average), linear (bilinear) or lanczos3 (sharpest)"},
	},
	Shape: func(in stages.Shape, p Params) (stages.Shape, bool) { return resizeSpec(p).Shape(in), false },
	Limit: func(in stages.Shape, p Params) error { return resizeSpec(p).CheckWork(in) },
	CPU: func(p Params) (CPUFunc, error) {
		spec := resizeSpec(p)
		if err := spec.Check(); err != nil {
			return nil, err
		}
		return func(dst, src *stages.Image, _ *[256]uint64) { stages.Resize(dst, src, spec) }, nil
	},
	GPU: func(p Params) (any, error) { return resizeSpec(p), nil },
}

func resizeSpec(p Params) stages.ResizeSpec {
	return stages.ResizeSpec{Width: int(p.Int("width")), Height: int(p.Int("height")),
		Fit: stages.Fit(p.Str("fit")), Filter: stages.Filter(p.Str("filter"))}
}

func gravityNames() []string {
	out := make([]string, len(stages.Gravities))
	for i, g := range stages.Gravities {
		out[i] = string(g)
	}
	return out
}

var cropDef = &StageDef{
	Name: stageCrop,
	Kind: PixelKind,
	Help: "keep a rectangle: x= y= width= height=, or width= height= gravity=",
	Doc: `Keeps width×height at origin x, y (from the top-left), or placed by gravity
(center, north, southeast, ...; centred spans round down). 0 for width or height means
to the image's edge. The rectangle is cut to the image, so it is never empty: an origin
past the edge keeps the last column or row. x/y and a gravity other than northwest are
exclusive.`,
	Params: []ParamSpec{
		{Name: "x", Kind: Int, Default: int64(0), Range: &Range{Min: 0, Max: 1 << 30}, Help: "left edge of the rectangle"},
		{Name: "y", Kind: Int, Default: int64(0), Range: &Range{Min: 0, Max: 1 << 30}, Help: "top edge of the rectangle"},
		{Name: "width", Kind: Int, Default: int64(0), Range: &Range{Min: 0, Max: 1 << 30}, Help: "width (0: to the right edge)"},
		{Name: "height", Kind: Int, Default: int64(0), Range: &Range{Min: 0, Max: 1 << 30}, Help: "height (0: to the bottom edge)"},
		{Name: "gravity", Kind: Enum, Default: string(stages.Northwest), Values: gravityNames(),
			Help: "where the rectangle sits when no x, y is given"},
	},
	Shape: func(in stages.Shape, p Params) (stages.Shape, bool) {
		_, _, w, h := cropSpec(p).Rect(in.W, in.H)
		return stages.Shape{W: w, H: h, C: in.C}, false
	},
	CPU: func(p Params) (CPUFunc, error) {
		spec := cropSpec(p)
		if err := spec.Check(); err != nil {
			return nil, err
		}
		return func(dst, src *stages.Image, _ *[256]uint64) {
			x, y, _, _ := spec.Rect(src.W, src.H)
			stages.Crop(dst, src, x, y)
		}, nil
	},
	GPU: func(p Params) (any, error) { return cropSpec(p), nil },
}

func cropSpec(p Params) stages.CropSpec {
	return stages.CropSpec{X: int(p.Int("x")), Y: int(p.Int("y")), Width: int(p.Int("width")),
		Height: int(p.Int("height")), Gravity: stages.Gravity(p.Str("gravity"))}
}

var flipDef = &StageDef{
	Name:  stageFlip,
	Kind:  PixelKind,
	Help:  "mirror: axis=h left to right, axis=v top to bottom",
	Doc:   `axis=h: out(x, y) = in(W−1−x, y); axis=v: out(x, y) = in(x, H−1−y).`,
	Shape: sameShape,
	Params: []ParamSpec{
		{Name: "axis", Kind: Enum, Default: string(stages.FlipH), Values: []string{string(stages.FlipH), string(stages.FlipV)},
			Help: "h mirrors left to right, v top to bottom"},
	},
	CPU: func(p Params) (CPUFunc, error) {
		axis := stages.Axis(p.Str("axis"))
		return func(dst, src *stages.Image, _ *[256]uint64) { stages.Flip(dst, src, axis) }, nil
	},
	GPU: func(p Params) (any, error) { return stages.Axis(p.Str("axis")), nil },
}

var rotateDef = &StageDef{
	Name: stageRotate,
	Kind: PixelKind,
	Help: "turn clockwise by 90, 180 or 270 degrees",
	Doc: `Clockwise, like vips rot: 90: out(x, y) = in(y, H−1−x); 180: out(x, y) =
in(W−1−x, H−1−y); 270: out(x, y) = in(W−1−y, x). W and H swap for 90 and 270.`,
	Params: []ParamSpec{
		{Name: "angle", Kind: Enum, Default: "90", Values: []string{"90", "180", "270"},
			Help: "degrees, clockwise"},
	},
	Shape: func(in stages.Shape, p Params) (stages.Shape, bool) {
		return stages.RotateShape(in, rotateAngle(p)), false
	},
	CPU: func(p Params) (CPUFunc, error) {
		angle := rotateAngle(p)
		return func(dst, src *stages.Image, _ *[256]uint64) { stages.Rotate(dst, src, angle) }, nil
	},
	GPU: func(p Params) (any, error) { return rotateAngle(p), nil },
}

// rotateAngle reads rotate's angle; the enum admits only the three right angles.
func rotateAngle(p Params) int {
	switch p.Str("angle") {
	case "180":
		return 180
	case "270":
		return 270
	}
	return 90
}

// Resize appends a resize to width×height with the given fit and filter.
func (p *Pipeline) Resize(width, height int, fit stages.Fit, filter stages.Filter) *Pipeline {
	return p.Then(stageResize, Args{"width": width, "height": height, "fit": string(fit), "filter": string(filter)})
}

// Crop appends a crop of width×height at (x, y).
func (p *Pipeline) Crop(x, y, width, height int) *Pipeline {
	return p.Then(stageCrop, Args{"x": x, "y": y, "width": width, "height": height})
}

// Flip appends a mirror along axis.
func (p *Pipeline) Flip(axis stages.Axis) *Pipeline {
	return p.Then(stageFlip, Args{"axis": string(axis)})
}

// Rotate appends a clockwise rotation by angle (90, 180 or 270) degrees.
func (p *Pipeline) Rotate(angle int) *Pipeline {
	return p.Then(stageRotate, Args{"angle": fmt.Sprint(angle)})
}
