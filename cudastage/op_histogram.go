package cudastage

// The histogram stage on the GPU: kernels/histogram.cu. Its op is a
// histogram op (sched.Op.Hist): Run zeroes each image's counts first.
func init() {
	register("histogram", &launcher{passes: direct("imgpipe_histogram", histTiles)})
}

// kHistGroups is IMGPIPE_HIST_GROUPS: 16-pixel groups per thread.
const kHistGroups = 4

// histTiles: a tile is 4 × 256 groups of 16 pixels, row after row; tiles_x
// is the number of groups in one row, as in grayscale.
func histTiles(w, h, _ int64) (blocks, tilesX int64) {
	tilesX = ceilDiv(w, kGrayPixels)
	return ceilDiv(tilesX*h, kThreads*kHistGroups), tilesX
}
