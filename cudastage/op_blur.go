package cudastage

import (
	"errors"
	"fmt"

	"github.com/imgpipe/imgpipe/stages"
)

// The blur stage on the GPU: kernels/blur.cu. Its launch arguments are
// stages.BlurArgs: the integer taps of stages.BlurTaps (2r+1 of them), so the
// device gets exactly the CPU's integers.
func init() {
	register("blur", &launcher{
		passes:  separable("imgpipe_blur_h", "imgpipe_blur_v", typed(func(a stages.BlurArgs) int { return len(a.Taps) / 2 })),
		scratch: separableScratch,
		check:   checked(checkTaps),
		params: typed(func(a stages.BlurArgs) []any {
			p := tapsParam{R: int32(len(a.Taps) / 2)}
			copy(p.W[:], a.Taps)
			return []any{&p}
		}),
	})
}

// kMaxBlurRadius is IMGPIPE_MAX_BLUR_RADIUS: stages.BlurTaps(stages.MaxBlurSigma)
// reaches 3σ either side of the centre.
const kMaxBlurRadius = 96

// tapsParam mirrors struct Taps of kernels/blur.cu: a by-value kernel
// parameter.
type tapsParam struct {
	R int32
	W [2*kMaxBlurRadius + 1]uint32
}

// checkTaps accepts taps as stages.BlurTaps makes them: an odd count from 3
// to 2·kMaxBlurRadius+1, symmetric, summing to 16384, which keeps every
// intermediate of the arithmetic of docs/semantics.md#blur in range.
func checkTaps(a stages.BlurArgs) error {
	taps := a.Taps
	if len(taps) < 3 || len(taps)%2 == 0 || len(taps) > 2*kMaxBlurRadius+1 {
		return fmt.Errorf("%d taps, want an odd count from 3 to %d", len(taps), 2*kMaxBlurRadius+1)
	}
	var sum uint64
	for i, t := range taps {
		if t != taps[len(taps)-1-i] {
			return errors.New("taps are not symmetric")
		}
		sum += uint64(t)
	}
	if sum != 16384 {
		return fmt.Errorf("taps sum to %d, want 16384", sum)
	}
	return nil
}
