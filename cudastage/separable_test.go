package cudastage

// The models of the separable passes' tiling (kernels/separable.cuh), which
// blur's and boxblur's kernels share (TestLaunchTables).

// hTiling: the horizontal separable pass, kHTile samples of kHRows rows.
func hTiling(e entry, tile int, mark func(x, y int)) {
	rect(e, tile, kHTile, kHRows, int(e.w*e.c), mark)
}

// vTiling: the vertical separable pass, kVTileX samples of kVTileY rows.
func vTiling(e entry, tile int, mark func(x, y int)) {
	rect(e, tile, kVTileX, kVTileY, int(e.w*e.c), mark)
}
