package pipeline

import (
	"github.com/imgpipe/imgpipe/cudastage/sched"
	"github.com/imgpipe/imgpipe/stages/array"
	"github.com/imgpipe/imgpipe/stages/npy"
)

// The add array stage (stages/array.Add; on a GPU kernels/array.cu).

const stageAdd = "add"

func init() { builtin(addDef) }

var addDef = &StageDef{
	Name: stageAdd,
	Kind: ArrayKind,
	Help: "add value to every element, in float32: x = float32(x+value)",
	Doc: `value is rounded to float32 once; each sum is one IEEE single-precision addition,
rounded to nearest even (numpy's float32 array + value), on the CPU and on a GPU alike.
Inf + -Inf is NaN; every NaN written is the quiet NaN 0x7FC00000.`,
	Params: []ParamSpec{
		{Name: "value", Kind: Float, Default: 0.0, Range: float32Range, Help: "the addend"},
	},
	Array: func(p Params) (ArrayFunc, error) {
		v := float32(p.Float("value"))
		return func(a *npy.Array) (float32, error) { array.Add(a.Data, v); return 0, nil }, nil
	},
	GPU: func(p Params) (sched.LaunchArgs, error) { return array.AddArgs{Value: float32(p.Float("value"))}, nil },
}
