package cudastage

import "github.com/imgpipe/imgpipe/cudastage/sched"

// The separable filters (blur, boxblur) share their tiling
// (kernels/separable.cuh): a horizontal pass from the source into a uint16
// per sample in scratch memory, then a vertical pass into the destination.

// Separable pass tiles, IMGPIPE_H_* and IMGPIPE_V_* of separable.cuh.
const (
	kHTile  = 1024 // horizontal pass: samples per block row
	kHRows  = 4    // horizontal pass: rows per block
	kVTileX = 64   // vertical pass: samples per block row
	kVTileY = 64   // vertical pass: rows per block
)

// separableScratch keeps each image's uint16 intermediate (rows of 2·W·C
// bytes, images aligned to ScratchAlign).
var separableScratch = &scratchSpec{
	layout: func(src []BatchImage) ([]BatchImage, uint64) {
		out := make([]BatchImage, len(src))
		var off uint64
		for i, s := range src {
			off = alignUp(off, ScratchAlign)
			out[i] = BatchImage{W: s.W, H: s.H, C: s.C, Off: off, Stride: 2 * s.W * s.C}
			off += 2 * uint64(s.W) * uint64(s.H) * uint64(s.C)
		}
		return out, off
	},
	max: func(srcBytes uint64, n int) uint64 { return 2*srcBytes + ScratchAlign*uint64(n) },
}

// separable returns the two passes of a separable filter whose kernels are h
// and v; radius gives the filter radius from the op's arguments, which sizes
// the vertical pass's shared memory ((64 + 2r) rows of 64 uint16).
func separable(h, v string, radius func(args sched.LaunchArgs) int) []pass {
	return []pass{
		{kernel: h, src: roleSrc, dst: roleScratch, tiles: hTiles},
		{kernel: v, src: roleScratch, dst: roleDst, tiles: vTiles,
			smem: func(args sched.LaunchArgs) uint32 { return uint32((kVTileY + 2*radius(args)) * kVTileX * 2) }},
	}
}

// hTiles: a tile is 1024 samples of 4 rows.
func hTiles(w, h, c int64) (blocks, tilesX int64) {
	tilesX = ceilDiv(w*c, kHTile)
	return tilesX * ceilDiv(h, kHRows), tilesX
}

// vTiles: a tile is 64 rows by 64 samples.
func vTiles(w, h, c int64) (blocks, tilesX int64) {
	tilesX = ceilDiv(w*c, kVTileX)
	return tilesX * ceilDiv(h, kVTileY), tilesX
}
