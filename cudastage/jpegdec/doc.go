// Package jpegdec parses a baseline JPEG file into the tables and unstuffed entropy-coded
// data that the CUDA kernels of kernels/jpegdec.cu decode, giving libjpeg-turbo's output
// bit for bit.
//
// Parse takes a file only where it can vouch that libjpeg-turbo 2.1.5, through
// tjDecompressHeader3 and tjDecompress2, decodes it without error and without any warning
// about the image data, and that the kernels reproduce that decode: one sequential
// Huffman-coded scan of 8-bit samples, grayscale or YCbCr with 4:4:4, 4:2:2, 4:2:0,
// 4:4:0 or 4:1:1 chroma, restart markers (if any) all present and in order, and EOI right
// after the scan. Everything else returns an error wrapping ErrUnsupported, and the caller
// hands the file to libjpeg-turbo on the CPU, which gives the real verdict. Being stricter
// than libjpeg only costs speed; being looser would give wrong pixels, so where in doubt
// Parse refuses.
//
// The checks mirror jdmarker.c (markers and their lengths), jdinput.c (image size,
// precision, sampling factors, quantisation tables), jdhuff.c (Huffman table validity,
// and how the entropy decoder reads 0xFF bytes and markers), jdapimin.c (the colour
// space a 3-component file is taken to be in) and turbojpeg.c (the subsampling layouts
// tjDecompressHeader3 accepts). Metadata that libjpeg skips with a warning the project
// counts as harmless (stray bytes between markers, a JFIF major version other than 1, an
// unknown Adobe transform) is skipped here too.
package jpegdec
