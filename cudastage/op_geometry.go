package cudastage

import (
	"encoding/binary"
	"fmt"

	"github.com/imgpipe/imgpipe/cudastage/sched"
	"github.com/imgpipe/imgpipe/stages"
)

// The geometry kernels (kernels/flip.cu, rotate.cu, crop.cu) spend one
// thread per destination pixel (kernels/geometry.cuh): an image takes
// ⌈pixels/256⌉ blocks, counted over the destination for crop, whose output
// size differs from the input's.
func pixelTiles(w, h, _ int64) (blocks, tilesX int64) { return ceilDiv(w*h, kThreads), 0 }

// resizeTiles: kernels/resize.cu makes tiles of kResizeTileX destination
// pixels by kResizeTileY rows, counted over the destination.
func resizeTiles(w, h, _ int64) (blocks, tilesX int64) {
	tilesX = ceilDiv(w, kResizeTileX)
	return tilesX * ceilDiv(h, kResizeTileY), tilesX
}

// pixelPass is the single pass of a geometry kernel.
func pixelPass(kernel string, byDst bool) []pass {
	p := direct(kernel, pixelTiles)
	p[0].byDst = byDst
	return p
}

// putInt32s writes vs little-endian into out.
func putInt32s(out []byte, vs ...int) {
	for i, v := range vs {
		binary.LittleEndian.PutUint32(out[4*i:], uint32(int32(v)))
	}
}

func init() {
	register("flip", &launcher{
		passes: pixelPass("imgpipe_flip", false),
		check: checked(func(a stages.FlipArgs) error {
			if a.Axis != stages.FlipH && a.Axis != stages.FlipV {
				return fmt.Errorf("flip axis %q, want h or v", string(a.Axis))
			}
			return nil
		}),
		params: typed(func(a stages.FlipArgs) []any {
			v := int32(0)
			if a.Axis == stages.FlipV {
				v = 1
			}
			return []any{&v}
		}),
	})
	register("rotate", &launcher{
		passes: pixelPass("imgpipe_rotate", false),
		check: checked(func(a stages.RotateArgs) error {
			if a.Angle != 90 && a.Angle != 180 && a.Angle != 270 {
				return fmt.Errorf("rotate angle %d, want 90, 180 or 270", a.Angle)
			}
			return nil
		}),
		params: typed(func(a stages.RotateArgs) []any {
			v := int32(a.Angle)
			return []any{&v}
		}),
	})
	// crop's record (struct CropRect of crop.cu): the rectangle of
	// stages.CropSpec.Rect for the image.
	register("crop", &launcher{
		passes: pixelPass("imgpipe_crop", true),
		check:  checked(func(a stages.CropArgs) error { return a.Spec.Check() }),
		extra:  kCropRecord,
		encodeExtra: func(args sched.LaunchArgs, src, _ BatchImage, out []byte) {
			x, y, w, h := args.(stages.CropArgs).Spec.Rect(src.W, src.H)
			putInt32s(out, x, y, w, h)
		},
	})
	// resize's record (struct ResizeGeom of resize.cu): per axis the scaled
	// size, offset and output size of stages.ResizeSpec.Axes.
	register("resize", &launcher{
		passes: []pass{{kernel: "imgpipe_resize", src: roleSrc, dst: roleDst, tiles: resizeTiles, byDst: true}},
		check:  checked(func(a stages.ResizeArgs) error { return a.Spec.Check() }),
		params: typed(func(a stages.ResizeArgs) []any {
			p := resizeParam{Filter: resizeFilters[a.Spec.Filter]}
			copy(p.LT[:], stages.LanczosTable())
			return []any{&p}
		}),
		extra: kResizeRecord,
		encodeExtra: func(args sched.LaunchArgs, src, _ BatchImage, out []byte) {
			x, y := args.(stages.ResizeArgs).Spec.Axes(src.W, src.H)
			putInt32s(out, x.Scaled, x.Off, x.Out, y.Scaled, y.Off, y.Out, 0, 0)
		},
	})
}

// Record sizes, the Lanczos table length and resize's tile, mirrored from
// the kernels' macros (TestKernelConstants reads them from the sources; the
// kernels assert the records' sizes).
const (
	kCropRecord    = 16  // IMGPIPE_CROP_RECORD
	kResizeRecord  = 32  // IMGPIPE_RESIZE_RECORD
	kResizeLanczos = 769 // IMGPIPE_RESIZE_LANCZOS
	kResizeTileX   = 64  // IMGPIPE_RESIZE_TILE_X
	kResizeTileY   = 16  // IMGPIPE_RESIZE_TILE_Y
)

// resizeFilters are the filter codes of ResizeArgs.filter in resize.cu.
var resizeFilters = map[stages.Filter]int32{stages.FilterArea: 0, stages.FilterLinear: 1, stages.FilterLanczos3: 2}

// resizeParam mirrors struct ResizeArgs of resize.cu: a by-value kernel
// parameter.
type resizeParam struct {
	Filter int32
	LT     [kResizeLanczos]int32
}
