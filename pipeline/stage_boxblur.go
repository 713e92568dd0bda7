package pipeline

import (
	"github.com/imgpipe/imgpipe/cudastage/sched"
	"github.com/imgpipe/imgpipe/stages"
)

// The boxblur stage (stages.BoxBlur; on a GPU kernels/boxblur.cu).

const stageBoxBlur = "boxblur"

func init() { builtin(boxBlurDef) }

var boxBlurDef = &StageDef{
	Name: stageBoxBlur,
	Kind: PixelKind,
	Help: "mean over a (2·radius+1)² window of each channel",
	Doc: `out = floor(sum / count) over the in-bounds pixels of the window, so borders average
fewer pixels. radius=1 is the 3×3 mean.`,
	Params: []ParamSpec{
		{Name: "radius", Kind: Int, Default: int64(1), Range: &Range{Min: 0, Max: stages.MaxBoxRadius},
			Help: "window radius in pixels"},
	},
	Shape: sameShape,
	CPU: func(p Params) (CPUFunc, error) {
		r := int(p.Int("radius"))
		return func(dst, src *stages.Image, _ *[256]uint64) {
			stages.BoxBlur(dst, src, r)
		}, nil
	},
	GPU: func(p Params) (sched.LaunchArgs, error) { return stages.BoxBlurArgs{Radius: int(p.Int("radius"))}, nil },
}
