package cudastage

// The geometry kernels' tiling models (TestLaunchTables), and resize's spec
// for the launcher tests: it has no default size.
func init() {
	for _, k := range []string{"imgpipe_flip", "imgpipe_rotate", "imgpipe_crop"} {
		tilings[k] = tiling{work: pixelTiling}
	}
	tilings["imgpipe_resize"] = tiling{work: func(e entry, tile int, mark func(x, y int)) {
		rect(e, tile, kResizeTileX, kResizeTileY, int(e.w), mark)
	}}
	stageSpecs["resize"] = "resize width=4"
}

// pixelTiling: the geometry kernels, one thread per destination pixel in
// row-major order, 256 per block (for rotate the destination has the
// source's pixel count, which is all the model counts).
func pixelTiling(e entry, tile int, mark func(x, y int)) {
	n := int(e.w) * int(e.h)
	for p := tile * kThreads; p < min((tile+1)*kThreads, n); p++ {
		mark(p%int(e.w), p/int(e.w))
	}
}
