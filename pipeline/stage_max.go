package pipeline

import (
	"github.com/imgpipe/imgpipe/stages/array"
	"github.com/imgpipe/imgpipe/stages/npy"
)

// The max reduction (stages/array.Max; on a GPU kernels/array.cu).

const stageMax = "max"

func init() { builtin(maxDef) }

var maxDef = &StageDef{
	Name:    stageMax,
	Kind:    ArrayKind,
	Reduces: true,
	Help:    "greatest element (NaN if any, +0 above -0) into the report",
	Doc: `The greatest element, in the order where -0 < +0; an array holding a NaN gives NaN
(like numpy.max). The order is total, so a GPU's tree gives the same value. An empty
array fails the input. The array passes through; the report's reductions.max holds the
value.`,
	Array: func(Params) (ArrayFunc, error) {
		return func(a *npy.Array) (float32, error) { return array.Max(a.Data) }, nil
	},
	GPU: NoLaunchArgs,
}
