package cudastage

// The transpose stage on the GPU: kernels/transpose.cu.
func init() {
	register("transpose", &launcher{passes: direct("imgpipe_transpose", transposeTiles)})
}

// Transpose tiles, IMGPIPE_TR_* of kernels/transpose.cu.
const (
	kTrTileY  = 32  // source rows
	kTrTileX1 = 128 // source columns, C = 1
	kTrTileX3 = 32  // source columns, C = 3
)

// transposeTiles: a tile is 32 source rows by 128 (C = 1) or 32 (C = 3)
// source pixels; tiles_x is the number of tiles across a source row.
func transposeTiles(w, h, c int64) (blocks, tilesX int64) {
	tx := int64(kTrTileX1)
	if c == 3 {
		tx = kTrTileX3
	}
	tilesX = ceilDiv(w, tx)
	return tilesX * ceilDiv(h, kTrTileY), tilesX
}
