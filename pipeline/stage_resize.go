package pipeline

import (
	"fmt"

	"github.com/imgpipe/imgpipe/cudastage/sched"

	"github.com/imgpipe/imgpipe/stages"
)

// The resize stage. Its exact semantics are the doc comments of stages.ResizeSpec.Axes,
// stages.ResizeAxis.Weights and stages.Resize, and docs/geometry.md.

const stageResize = "resize"

func init() { builtin(resizeDef) }

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
	GPU: func(p Params) (sched.LaunchArgs, error) { return stages.ResizeArgs{Spec: resizeSpec(p)}, nil },
}

func resizeSpec(p Params) stages.ResizeSpec {
	return stages.ResizeSpec{Width: int(p.Int("width")), Height: int(p.Int("height")),
		Fit: stages.Fit(p.Str("fit")), Filter: stages.Filter(p.Str("filter"))}
}
