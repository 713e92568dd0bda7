package pipeline

import (
	"github.com/imgpipe/imgpipe/cudastage/sched"
	"github.com/imgpipe/imgpipe/stages/array"
	"github.com/imgpipe/imgpipe/stages/npy"
)

// The scale array stage (stages/array.Scale; on a GPU kernels/array.cu).

const stageScale = "scale"

func init() { builtin(scaleDef) }

var scaleDef = &StageDef{
	Name: stageScale,
	Kind: ArrayKind,
	Help: "multiply every element by factor, in float32: x = float32(x*factor)",
	Doc: `factor is rounded to float32 once; each product is one IEEE single-precision
multiplication, rounded to nearest even (numpy's float32 array * factor), on the CPU and
on a GPU alike. NaN and Inf propagate as IEEE says (Inf*0 is NaN); every NaN written is
the quiet NaN 0x7FC00000 (see stages/array).`,
	Params: []ParamSpec{
		{Name: "factor", Kind: Float, Default: 1.0, Range: float32Range, Help: "the multiplier"},
	},
	Array: func(p Params) (ArrayFunc, error) {
		f := float32(p.Float("factor"))
		return func(a *npy.Array) (float32, error) { array.Scale(a.Data, f); return 0, nil }, nil
	},
	GPU: func(p Params) (sched.LaunchArgs, error) {
		return array.ScaleArgs{Factor: float32(p.Float("factor"))}, nil
	},
}
