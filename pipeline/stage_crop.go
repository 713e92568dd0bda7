package pipeline

import (
	"github.com/imgpipe/imgpipe/cudastage/sched"
	"github.com/imgpipe/imgpipe/stages"
)

// The crop stage. Its exact semantics are the doc comment of stages.CropSpec.Rect and
// docs/geometry.md.

const stageCrop = "crop"

func init() { builtin(cropDef) }

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
	GPU: func(p Params) (sched.LaunchArgs, error) { return stages.CropArgs{Spec: cropSpec(p)}, nil },
}

func cropSpec(p Params) stages.CropSpec {
	return stages.CropSpec{X: int(p.Int("x")), Y: int(p.Int("y")), Width: int(p.Int("width")),
		Height: int(p.Int("height")), Gravity: stages.Gravity(p.Str("gravity"))}
}
