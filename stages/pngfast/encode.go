package pngfast

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"
	"sync"
)

// BlockSize is the number of filtered bytes per deflate block and IDAT chunk
// (docs/png-fast.md §2); the last block holds the remaining 1..BlockSize.
const BlockSize = 1 << 16

// File layout constants of docs/png-fast.md §5.
const (
	signature  = "\x89PNG\r\n\x1a\n"
	chunkBytes = 12 // length, type and CRC around a chunk's data
	ihdrBytes  = 13
	zlibHeader = 2 // 78 01
	adlerBytes = 4
	syncMarker = 4 // 00 00 FF FF after a non-final block's empty stored block
	// fileFixed is everything but the blocks and their IDAT chunks.
	fileFixed = len(signature) + chunkBytes + ihdrBytes + zlibHeader + adlerBytes + chunkBytes
	// headerMaxBits bounds a block's bits before its literals (§6):
	// BFINAL+BTYPE, HLIT, HDIST, HCLEN, 19 code-length lengths, 258
	// run-length symbols of at most 7 bits, each with at most 7 extra bits.
	headerMaxBits = 3 + 5 + 5 + 4 + numCL*3 + (numLit+1)*(maxCLBits+7)
)

// BlockBound is the most bytes the deflate data of one block of m filtered
// bytes takes, sync-flush marker included (§6). A block is a whole number of
// bytes, so encoders may give each block its own region of this size.
func BlockBound(m int) int {
	return (headerMaxBits+maxLitBits*(m+1)+7+7)/8 + syncMarker
}

// maxFiltered caps n = H·(1+W·C) so that Bound (about 15/8·n) cannot
// overflow an int; on 64-bit machines it is far beyond any image the engine
// admits.
const maxFiltered = math.MaxInt / 16

// Bound is the most bytes Encode writes for a W×H image with C channels
// (docs/png-fast.md §6); both encoders size their output buffers with it. It
// panics on sizes the format does not take (see Check).
func Bound(w, h, c int) int {
	if err := Check(w, h, c); err != nil {
		panic(err)
	}
	n := filteredLen(w, h, c)
	nb := (n + BlockSize - 1) / BlockSize
	full := n / BlockSize
	b := fileFixed + nb*chunkBytes + full*BlockBound(BlockSize)
	if last := n - full*BlockSize; last > 0 {
		b += BlockBound(last)
	}
	return b
}

// Check reports whether a W×H image with C channels can be encoded: C is 1
// or 3, W and H are 1..2^31−1 (PNG's limit), and the filtered stream is of a
// size Bound can count.
func Check(w, h, c int) error {
	if c != 1 && c != 3 {
		return fmt.Errorf("pngfast: %d channels, want 1 or 3", c)
	}
	if w < 1 || h < 1 || w > math.MaxInt32 || h > math.MaxInt32 {
		return fmt.Errorf("pngfast: image is %dx%d, want 1..%d on each side", w, h, math.MaxInt32)
	}
	if (maxFiltered/h-1)/c < w {
		return fmt.Errorf("pngfast: image is %dx%dx%d, too large", w, h, c)
	}
	return nil
}

// filteredLen is n, the length of the filtered stream F (§1).
func filteredLen(w, h, c int) int { return h * (1 + w*c) }

// Encode writes the PNG file of the W×H image with C channels whose rows
// start stride bytes apart in pix into dst, and returns its length. dst must
// hold Bound(w, h, c) bytes; bytes of dst past the returned length may have
// been written. It panics when the arguments are inconsistent (a bad size, a
// short pix or dst): callers validate images before encoding.
func Encode(dst, pix []byte, w, h, c, stride int) int {
	if err := Check(w, h, c); err != nil {
		panic(err)
	}
	if stride < w*c || len(pix) < (h-1)*stride+w*c {
		panic(fmt.Sprintf("pngfast: %d bytes at stride %d do not hold a %dx%dx%d image", len(pix), stride, w, h, c))
	}
	if b := Bound(w, h, c); len(dst) < b {
		panic(fmt.Sprintf("pngfast: destination of %d bytes, want Bound = %d", len(dst), b))
	}
	e := encoders.Get().(*encoder)
	defer encoders.Put(e)
	return e.encode(dst, pix, w, h, c, stride)
}

// Append appends the PNG file of the image (as for Encode) to dst, growing
// it by at most Bound bytes, and returns the extended slice.
func Append(dst, pix []byte, w, h, c, stride int) []byte {
	b := Bound(w, h, c)
	if cap(dst)-len(dst) < b {
		dst = append(dst[:len(dst):len(dst)], make([]byte, b)...)[:len(dst)]
	}
	n := Encode(dst[len(dst):len(dst)+b], pix, w, h, c, stride)
	return dst[:len(dst)+n]
}

// encoders recycles the per-call scratch (a block buffer, histograms, code
// tables: about 70 KB), too much to allocate per image.
var encoders = sync.Pool{New: func() any { return new(encoder) }}

// encoder is the scratch of one Encode call.
type encoder struct {
	block [BlockSize]byte    // one block of F
	hist  [4][256]uint32     // byte counts, in four tables to break store-to-load chains
	count [numLit]uint32     // the block's literal/length counts
	litL  [numLit]uint8      // their code lengths
	lit   codeTable          // and codes
	huff  huffman            // length construction scratch
	rle   [numLit + 1]uint16 // run-length symbols of the lengths: symbol | extra<<8
	clCnt [numCL]uint32      // code-length symbol counts
	clL   [numCL]uint8       // their lengths
	cl    codeTable          // and codes (first 19 entries)
	src   filterCursor       // where the next block starts in the image
	adler adler32            // of F so far
	bw    bitWriter          // output
}

func (e *encoder) encode(dst, pix []byte, w, h, c, stride int) int {
	pos := copy(dst, signature)
	var ihdr [ihdrBytes]byte
	binary.BigEndian.PutUint32(ihdr[0:], uint32(w))
	binary.BigEndian.PutUint32(ihdr[4:], uint32(h))
	ihdr[8] = 8 // bit depth
	if c == 3 {
		ihdr[9] = 2 // colour type RGB; 0 (gray) otherwise
	} // compression, filter and interlace methods are 0
	pos = putChunk(dst, pos, "IHDR", ihdr[:])

	n := filteredLen(w, h, c)
	e.src = filterCursor{pix: pix, w: w, h: h, c: c, stride: stride}
	e.adler = newAdler32()
	for start := 0; start < n; start += BlockSize {
		m := min(BlockSize, n-start)
		last := start+m == n
		chunk := pos
		pos += 8 // length and type, written below
		if start == 0 {
			dst[pos], dst[pos+1] = 0x78, 0x01
			pos += zlibHeader
		}
		blk := e.block[:m]
		e.src.fill(blk, &e.hist)
		e.adler.update(blk)
		pos = e.writeBlock(dst, pos, blk, last)
		if last {
			binary.BigEndian.PutUint32(dst[pos:], e.adler.sum())
			pos += adlerBytes
		}
		pos = closeChunk(dst, chunk, pos, "IDAT")
	}
	return putChunk(dst, pos, "IEND", nil)
}

// putChunk writes a whole chunk at pos and returns the position after it.
func putChunk(dst []byte, pos int, typ string, data []byte) int {
	copy(dst[pos+8:], data)
	return closeChunk(dst, pos, pos+8+len(data), typ)
}

// closeChunk completes the chunk starting at start whose data ends at end:
// its length, type and CRC. It returns the position after the CRC.
func closeChunk(dst []byte, start, end int, typ string) int {
	binary.BigEndian.PutUint32(dst[start:], uint32(end-start-8))
	copy(dst[start+4:], typ)
	binary.BigEndian.PutUint32(dst[end:], crc32.ChecksumIEEE(dst[start+4:end]))
	return end + 4
}
