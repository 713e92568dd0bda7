package pipeline

import (
	"github.com/imgpipe/imgpipe/stages/array"
	"github.com/imgpipe/imgpipe/stages/npy"
)

// The min reduction (stages/array.Min; on a GPU kernels/array.cu).

const stageMin = "min"

func init() { builtin(minDef) }

var minDef = &StageDef{
	Name:    stageMin,
	Kind:    ArrayKind,
	Reduces: true,
	Help:    "least element (NaN if any, -0 below +0) into the report",
	Doc: `The least element, in the order where -0 < +0; an array holding a NaN gives NaN (like
numpy.min). The order is total, so a GPU's tree gives the same value. An empty array
fails the input. The array passes through; the report's reductions.min holds the value.`,
	Array: func(Params) (ArrayFunc, error) {
		return func(a *npy.Array) (float32, error) { return array.Min(a.Data) }, nil
	},
	GPU: NoLaunchArgs,
}
