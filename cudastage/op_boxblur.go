package cudastage

import (
	"fmt"

	"github.com/imgpipe/imgpipe/stages"
)

// The boxblur stage on the GPU: kernels/boxblur.cu. Its launch arguments are
// stages.BoxBlurArgs, the radius.
func init() {
	register("boxblur", &launcher{
		passes:  separable("imgpipe_box_h", "imgpipe_box_v", typed(func(a stages.BoxBlurArgs) int { return a.Radius })),
		scratch: separableScratch,
		check: checked(func(a stages.BoxBlurArgs) error {
			if a.Radius < 0 || a.Radius > kMaxBoxRadius {
				return fmt.Errorf("radius %d out of range [0, %d]", a.Radius, kMaxBoxRadius)
			}
			return nil
		}),
		params: typed(func(a stages.BoxBlurArgs) []any {
			r := int32(a.Radius)
			return []any{&r}
		}),
	})
}

// kMaxBoxRadius is IMGPIPE_MAX_BOX_RADIUS (stages.MaxBoxRadius).
const kMaxBoxRadius = 15
