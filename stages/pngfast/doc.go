// Package pngfast is the reference encoder of imgpipe's `fast` PNG encoding,
// the default of `save format=png`: one fully specified byte sequence for a
// given image, which the CPU (this package) and the GPU encoder
// (kernels/pngenc.cu) both produce byte for byte. The specification is
// docs/png-fast.md; this summary does not replace it.
//
// The encoding, in short:
//
//   - Filter: every row gets PNG filter 1 (Sub), F = row[i] − row[i−C]
//     modulo 256. The filtered stream F holds H·(1 + W·C) bytes.
//   - Blocks: F is cut into blocks of BlockSize bytes (the last one shorter),
//     each compressed on its own as one dynamic-Huffman deflate block of
//     literals only (no string matching), ended by a Z_SYNC_FLUSH marker, or
//     by byte alignment for the last block. Blocks can therefore be encoded
//     in any order and on any processor.
//   - Codes: each block's literal/length lengths are Lengths of its byte
//     counts (plus one end-of-block), a two-queue Huffman construction with
//     fixed tie-breaking, limited to 15 bits by JPEG's Adjust_BITS; the
//     code-length code is built the same way, limited to 7 bits. Codes are
//     RFC 1951's canonical codes.
//   - File: signature, IHDR (8-bit gray or RGB), one IDAT chunk per block
//     (zlib header 78 01 in the first, the Adler-32 of F after the last),
//     IEND. No other chunks.
//
// Every output is plain PNG: any decoder reads it. Only the choice of bytes is
// imgpipe's, so that the bytes do not depend on the device that wrote them.
//
// Speed comes from a SWAR Sub filter fused with a four-table histogram, a
// 64-bit bit buffer that writes three or four codes per store, codes
// pre-reversed for deflate's bit order, hash/crc32 (vectorised by Go) and
// per-encoder scratch reused through a pool, so Encode allocates nothing.
// Encode works on the calling goroutine only: the engine parallelises across
// images.
package pngfast
