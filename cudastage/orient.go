package cudastage

import (
	"fmt"

	"github.com/imgpipe/imgpipe/cudastage/cu"
)

// orientKernel is kernels/orient.cu's function: the EXIF orientation the
// file decoder applies after nvJPEG decoded a JPEG upright.
const orientKernel = "imgpipe_orient"

// Orient queues on s the copy of the sw×sh packed RGB image at src into dst
// under EXIF orientation o (2..8, stages' meaning), packed; for o ≥ 5 the
// result is sh×sw. src and dst must not overlap.
func (k *Kernels) Orient(s cu.Stream, src cu.DevicePtr, sw, sh int, dst cu.DevicePtr, o int) error {
	im := BatchImage{W: sw, H: sh, C: 3, Stride: 3 * sw}
	if err := im.checkShape(); err != nil {
		return fmt.Errorf("orient: %w", err)
	}
	if o < 2 || o > 8 {
		return fmt.Errorf("orient: orientation %d, want 2 to 8", o)
	}
	n := uint64(3 * sw * sh)
	if src < dst+cu.DevicePtr(n) && dst < src+cu.DevicePtr(n) {
		return fmt.Errorf("orient: source and destination overlap")
	}
	fn, ok := k.fn[orientKernel]
	if !ok {
		return fmt.Errorf("orient: kernel %s is not loaded", orientKernel)
	}
	w, h, o32 := int32(sw), int32(sh), int32(o)
	blocks := ceilDiv(int64(sw)*int64(sh), kThreads)
	return cu.LaunchKernel(fn, [3]uint32{uint32(blocks), 1, 1}, [3]uint32{kThreads, 1, 1}, 0, s, &src, &w, &h, &dst, &o32)
}
