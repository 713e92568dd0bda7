package cudastage

import "fmt"

// The boxblur stage on the GPU: kernels/boxblur.cu. Its launch argument is
// the radius (an int).
func init() {
	register("boxblur", &launcher{
		passes:  separable("imgpipe_box_h", "imgpipe_box_v", func(args any) int { return args.(int) }),
		scratch: separableScratch,
		check: func(args any) error {
			r, ok := args.(int)
			if !ok {
				return fmt.Errorf("launch arguments are %T, want the int radius", args)
			}
			if r < 0 || r > kMaxBoxRadius {
				return fmt.Errorf("radius %d out of range [0, %d]", r, kMaxBoxRadius)
			}
			return nil
		},
		params: func(args any) []any {
			r := int32(args.(int))
			return []any{&r}
		},
	})
}

// kMaxBoxRadius is IMGPIPE_MAX_BOX_RADIUS (stages.MaxBoxRadius).
const kMaxBoxRadius = 15
