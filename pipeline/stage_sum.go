package pipeline

import (
	"github.com/imgpipe/imgpipe/stages/array"
	"github.com/imgpipe/imgpipe/stages/npy"
)

// The sum reduction (stages/array.Sum; on a GPU kernels/array.cu).

const stageSum = "sum"

func init() { builtin(sumDef) }

var sumDef = &StageDef{
	Name:    stageSum,
	Kind:    ArrayKind,
	Reduces: true,
	Help:    "float32 sum of the elements, in a fixed block-tree order, into the report",
	Doc: `Adds in float32 in a fixed order, so every machine gives the same bits: blocks of 256
consecutive elements, each reduced as a tree with halving strides (s[i] += s[i+stride] for
stride 128, 64, ..., 1 and i+stride inside the block), then the block sums reduced the same
way, until one value remains (see stages/array.Sum). A GPU reduces in this very tree,
one thread block per block of 256, so it gives the same bits. An empty array sums to 0;
a NaN makes the sum NaN. The array passes through; the report's reductions.sum holds the
value.`,
	Array: func(Params) (ArrayFunc, error) {
		return func(a *npy.Array) (float32, error) { return array.Sum(a.Data), nil }, nil
	},
	GPU: NoLaunchArgs,
}
