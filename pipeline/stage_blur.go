package pipeline

import (
	"github.com/imgpipe/imgpipe/cudastage/sched"
	"github.com/imgpipe/imgpipe/stages"
)

// The blur stage (stages.Blur; on a GPU kernels/blur.cu, whose launch arguments are the
// taps bound here).

const stageBlur = "blur"

func init() { builtin(blurDef) }

var blurDef = &StageDef{
	Name: stageBlur,
	Kind: PixelKind,
	Help: "Gaussian blur of each channel, integer taps, replicated borders",
	Doc: `Separable Gaussian with radius r = max(1, ceil(3·sigma)) and integer taps, computed
once per run: g_i = exp(-i²/(2·sigma²)) in float64 for i in [-r, r], w_i = round(g_i/Σg ·
16384) with halves away from zero, then w_0 += 16384 - Σw so the taps sum to 16384.
Borders replicate the edge pixels (coordinates clamped). Horizontal pass: h = Σ w_i ·
p(x+i, y), stored as h16 = (h + 32) >> 6. Vertical pass: v = Σ w_j · h16(x, y+j), output
(v + 2^21) >> 22. Exact integer arithmetic, so CPU and GPU give the same bits.`,
	Params: []ParamSpec{
		{Name: "sigma", Kind: Float, Default: 1.0, Range: &Range{Min: 0, Max: stages.MaxBlurSigma, MinOpen: true},
			Help: "standard deviation in pixels"},
	},
	Shape: sameShape,
	CPU: func(p Params) (CPUFunc, error) {
		taps := stages.BlurTaps(p.Float("sigma"))
		return func(dst, src *stages.Image, _ *[256]uint64) {
			stages.Blur(dst, src, taps)
		}, nil
	},
	GPU: func(p Params) (sched.LaunchArgs, error) {
		return stages.BlurArgs{Taps: stages.BlurTaps(p.Float("sigma"))}, nil
	},
}
