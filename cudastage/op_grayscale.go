package cudastage

// The grayscale stage on the GPU: kernels/grayscale.cu.
func init() {
	register("grayscale", &launcher{passes: direct("imgpipe_grayscale", grayTiles)})
}

// grayTiles: a tile is 256 groups of 16 pixels of a row, counted row after
// row; tiles_x is the number of groups in one row.
func grayTiles(w, h, _ int64) (blocks, tilesX int64) {
	tilesX = ceilDiv(w, kGrayPixels)
	return ceilDiv(tilesX*h, kThreads), tilesX
}
