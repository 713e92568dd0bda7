package pipeline

import (
	"github.com/imgpipe/imgpipe/cudastage/sched"
	"github.com/imgpipe/imgpipe/stages"
)

// The rotate stage (stages.Rotate; on a GPU kernels/rotate.cu).

const stageRotate = "rotate"

func init() { builtin(rotateDef) }

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
	GPU: func(p Params) (sched.LaunchArgs, error) { return stages.RotateArgs{Angle: rotateAngle(p)}, nil },
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
