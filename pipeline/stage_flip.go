package pipeline

import (
	"github.com/imgpipe/imgpipe/cudastage/sched"
	"github.com/imgpipe/imgpipe/stages"
)

// The flip stage (stages.Flip; on a GPU kernels/flip.cu).

const stageFlip = "flip"

func init() { builtin(flipDef) }

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
	GPU: func(p Params) (sched.LaunchArgs, error) {
		return stages.FlipArgs{Axis: stages.Axis(p.Str("axis"))}, nil
	},
}
