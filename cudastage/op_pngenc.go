package cudastage

import (
	"fmt"
	"hash/crc32"
	"math"

	"github.com/imgpipe/imgpipe/cudastage/sched"
)

// The fast PNG encoder on the GPU (docs/png-fast.md): kernels/pngenc.cu. Its
// op is the save stage's encoding op (sched.Op.Encode with Format
// "png-fast"), a segment's last: each image becomes a whole PNG file at its
// Dst offset and its length goes to the lengths buffer. Three passes over
// the batch, each with the parameters (table, n, src, dst, scratch, lens,
// crc tables): plan (a CTA per 64 KiB block: histogram, code, header, size),
// layout (a CTA per image: chunk offsets, Adler-32, signature, IHDR, IEND,
// length) and pack (a CTA per block: bits, chunk, CRC-32).
func init() {
	register("save", &launcher{
		passes:  pngPasses,
		scratch: pngScratch,
		encode:  pngFormat,
		check: func(args sched.LaunchArgs) error {
			if args != nil {
				return fmt.Errorf("takes no launch arguments, got %T", args)
			}
			return nil
		},
		params: func(sched.LaunchArgs) []any { return []any{&pngCRC} },
	})
}

// pngFormat is the sched.EncodeOp.Format the kernels write.
const pngFormat = "png-fast"

// Mirrors of kernels/pngenc.cu.
const (
	kPngBlock      = 65536  // IMGPIPE_PNG_BLOCK: filtered bytes per deflate block
	kPngRecBytes   = 1536   // IMGPIPE_PNG_REC_BYTES: one block's record in scratch
	kPngStageBytes = 123344 // IMGPIPE_PNG_STAGE_BYTES: one block's staged bit stream
)

// pngHeaderBits bounds a block header (§6): BFINAL, BTYPE, HLIT, HDIST,
// HCLEN, 19 code-length lengths, and 258 run-length symbols of at most 7
// bits with at most 7 extra bits each.
const pngHeaderBits = 3 + 5 + 5 + 4 + 19*3 + 258*(7+7)

// pngBlockBits bounds the bits of a block of m filtered bytes before its
// alignment (§6: every literal and the end of block take at most 15 bits;
// the 7 covers the empty stored block's 3 bits and the padding).
func pngBlockBits(m int64) int64 { return pngHeaderBits + 15*(m+1) + 7 }

// pngBlocks is the number of deflate blocks of a w×h×c image: its filtered
// stream has h·(1 + w·c) bytes (§1, §2).
func pngBlocks(w, h, c int64) int64 { return ceilDiv(h*(1+w*c), kPngBlock) }

// pngFileBound is the most bytes the kernels write for a w×h×c image (§6):
// signature, IHDR, a chunk per block with the sync-flush marker on all but
// the last, the zlib header and Adler-32, IEND.
func pngFileBound(w, h, c int64) int64 {
	n := h * (1 + w*c)
	nb := pngBlocks(w, h, c)
	last := n - (nb-1)*kPngBlock
	full := 12 + ceilDiv(pngBlockBits(kPngBlock), 8) + 4
	return 8 + 25 + (nb-1)*full + 12 + ceilDiv(pngBlockBits(last), 8) + 2 + 4 + 12
}

// pngPasses are the encoder's launches; the table entries' tiles_x is the
// image's block count and reserved its first block's global index.
var pngPasses = []pass{
	{kernel: "imgpipe_png_plan", src: roleSrc, dst: roleDst, extra: pngExtra, tiles: pngBlockTiles, units: pngBlocks},
	{kernel: "imgpipe_png_layout", src: roleSrc, dst: roleDst, extra: pngExtra, units: pngBlocks,
		tiles: func(w, h, c int64) (int64, int64) { return 1, pngBlocks(w, h, c) }},
	{kernel: "imgpipe_png_pack", src: roleSrc, dst: roleDst, extra: pngExtra, tiles: pngBlockTiles, units: pngBlocks},
}

// pngExtra are the buffers every encoder kernel takes after src and dst.
var pngExtra = []bufRole{roleScratch, roleLens}

// pngBlockTiles: a CTA per block.
func pngBlockTiles(w, h, c int64) (blocks, tilesX int64) {
	nb := pngBlocks(w, h, c)
	return nb, nb
}

// pngScratch is the block records, then the blocks' staged bit streams, both
// indexed by the blocks' global index (the kernels find them from the table,
// so there are no placements).
var pngScratch = &scratchSpec{
	layout: func(src []BatchImage) ([]BatchImage, uint64) {
		var nb uint64
		for _, s := range src {
			nb += uint64(pngBlocks(int64(s.W), int64(s.H), int64(s.C)))
		}
		return nil, nb * (kPngRecBytes + kPngStageBytes)
	},
	// An image of s pixel bytes has at most 2·s filtered bytes (a row of
	// w·c bytes gains one), so n images of srcBytes in all have at most
	// ⌈2·srcBytes / 64 KiB⌉ + n blocks.
	max: func(srcBytes uint64, n int) uint64 {
		nb := uint64(ceilDiv(int64(min(2*srcBytes, math.MaxInt64/2)), kPngBlock)) + uint64(n)
		return nb * (kPngRecBytes + kPngStageBytes)
	},
	align: 16, // the records hold 8-byte fields, the bit streams 16-byte aligned words
}

// checkEncodeDst checks an encoding op's file placement: the op's Bound for
// the source's shape is the room the file has, and it must hold the most the
// kernels can write.
func checkEncodeDst(op sched.Op, src, dst BatchImage) error {
	room := op.Encode.Bound(src.shape())
	need := pngFileBound(int64(src.W), int64(src.H), int64(src.C))
	switch {
	case int64(room) < need:
		return fmt.Errorf("%s's bound gives a %dx%dx%d image %d bytes, the GPU encoder may write %d",
			op.Encode.Format, src.W, src.H, src.C, room, need)
	case dst.Off > math.MaxInt64-uint64(room):
		return fmt.Errorf("offset %d is out of range", dst.Off)
	}
	return nil
}

// pngCRCParam mirrors struct PngCrc of kernels/pngenc.cu: the CRC-32 byte
// table and x2n[k] = x^(2^k) mod P, from which the kernels shift a CRC past
// any number of bytes (zlib's crc32_combine, in the reflected domain).
type pngCRCParam struct {
	Table [256]uint32
	X2n   [32]uint32
}

// pngCRC is the encoder's constant kernel parameter.
var pngCRC = func() pngCRCParam {
	var p pngCRCParam
	p.Table = *crc32.IEEETable
	x := uint32(1) << 30 // x^1
	for k := range p.X2n {
		p.X2n[k] = x
		x = crcMulModP(x, x)
	}
	return p
}()

// crcMulModP is a·b modulo the CRC-32 polynomial, in the reflected
// representation (bit 31 is x^0), as the kernels' multmodp.
func crcMulModP(a, b uint32) uint32 {
	var p uint32
	for i := range 32 {
		if a&(1<<(31-i)) != 0 {
			p ^= b
		}
		if b&1 != 0 {
			b = b>>1 ^ crc32.IEEE
		} else {
			b >>= 1
		}
	}
	return p
}
