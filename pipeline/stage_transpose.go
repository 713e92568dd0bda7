package pipeline

import (
	"github.com/imgpipe/imgpipe/stages"
)

// The transpose stage (stages.Transpose; on a GPU kernels/transpose.cu).

const stageTranspose = "transpose"

func init() { builtin(transposeDef) }

var transposeDef = &StageDef{
	Name: stageTranspose,
	Kind: PixelKind,
	Help: "swap rows and columns: out(x, y) = in(y, x)",
	Doc:  `Width and height swap; channels are kept.`,
	Shape: func(in stages.Shape, _ Params) (stages.Shape, bool) {
		return stages.Shape{W: in.H, H: in.W, C: in.C}, false
	},
	CPU: func(Params) (CPUFunc, error) {
		return func(dst, src *stages.Image, _ *[256]uint64) {
			stages.Transpose(dst, src)
		}, nil
	},
	GPU: NoLaunchArgs,
}
