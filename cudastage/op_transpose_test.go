package cudastage

// The model of kernels/transpose.cu's tiling (TestLaunchTables): tiles of
// kTrTileY source rows by kTrTileX1 (gray) or kTrTileX3 (RGB) pixels.
func init() {
	tilings["imgpipe_transpose"] = tiling{work: func(e entry, tile int, mark func(x, y int)) {
		twx := kTrTileX1
		if e.c == 3 {
			twx = kTrTileX3
		}
		rect(e, tile, twx, kTrTileY, int(e.w), mark)
	}}
}
