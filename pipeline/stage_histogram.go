package pipeline

import (
	"github.com/imgpipe/imgpipe/stages"
)

// The histogram stage (stages.Histogram; on a GPU kernels/histogram.cu), the one stage
// that attaches counts to the report.

const stageHistogram = "histogram"

func init() { builtin(histogramDef) }

var histogramDef = &StageDef{
	Name:      stageHistogram,
	Kind:      PixelKind,
	Histogram: true,
	Help:      "count the 256 gray levels (luma of RGB) into the report",
	Doc: `Counts values of a gray image, or the grayscale formula's Y of an RGB image, into 256
bins. The image passes through unchanged; the counts go to the report.`,
	Shape: func(in stages.Shape, _ Params) (stages.Shape, bool) { return in, true },
	CPU: func(Params) (CPUFunc, error) {
		return func(_, src *stages.Image, hist *[256]uint64) {
			stages.Histogram(hist, src)
		}, nil
	},
	GPU: NoLaunchArgs,
}
