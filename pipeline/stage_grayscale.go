package pipeline

import (
	"github.com/imgpipe/imgpipe/stages"
)

// The grayscale stage (stages.Grayscale; on a GPU kernels/grayscale.cu).

const stageGrayscale = "grayscale"

func init() { builtin(grayscaleDef) }

var grayscaleDef = &StageDef{
	Name: stageGrayscale,
	Kind: PixelKind,
	Help: "RGB to gray: Y = (9798·R + 19235·G + 3735·B + 16384) >> 15",
	Doc: `Converts RGB to one channel with integer weights that sum to 32768; bit-exact with
OpenCV's cvtColor(RGB2GRAY) on 8-bit images. On a gray image it is the identity.`,
	Shape: func(in stages.Shape, _ Params) (stages.Shape, bool) {
		if in.C == 1 {
			return in, true
		}
		return stages.Shape{W: in.W, H: in.H, C: 1}, false
	},
	CPU: func(Params) (CPUFunc, error) {
		return func(dst, src *stages.Image, _ *[256]uint64) {
			if dst != nil {
				stages.Grayscale(dst, src)
			}
		}, nil
	},
	GPU: NoLaunchArgs,
}
