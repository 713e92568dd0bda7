// Package stages holds the CPU reference implementation of every imgpipe
// image stage, and the file formats and atomic writes around them.
//
// The functions here define the bits. The GPU kernels in cudastage must
// reproduce them exactly, so every formula follows docs/semantics.md,
// docs/geometry.md and docs/stages.md to the letter and uses integer
// arithmetic only (the blur taps are computed once in float64, as
// docs/semantics.md#blur says).
//
// What it holds:
//
//   - Pixel stages: Grayscale, Blur (with BlurTaps), BoxBlur, Transpose,
//     Histogram, Resize (ResizeSpec, the integer taps of ResizeAxis), Crop
//     (CropSpec), Flip, Rotate and Orient (the EXIF orientations). Grayscale
//     and Blur have AVX2 kernels on amd64 that give the same bits.
//   - Decoders: Decode and DecodeBy for JPEG (Go's image/jpeg, or
//     libjpeg-turbo through stages/jpegturbo, at a DCT scale if asked), PNG,
//     GIF, BMP, TIFF and WebP; DecodeStream for the formats decoded from a
//     reader; DecodeHeader, CheckFile and DecodeCost, which check a file's
//     header, pixel limit, JPEG scan limits and decoding cost before any
//     pixel memory is taken; FromImage for a Go image.Image.
//   - Encoders: Encode for PNG (the fast encoding of stages/pngfast, or
//     zlib levels), JPEG (libjpeg-turbo where it loads, else Go's), WebP
//     (stages/libwebp), TIFF and NumPy .npy (stages/npy); SaveFormats and
//     FormatExt name them.
//   - Atomic writes: WriteFileAtomic, WriteFileAtomicIn, and StageIn with
//     CommitIn for a group of files made durable by one file-system sync;
//     RemoveTemps and RemoveTempsOf clean up the temporaries of a killed run.
//
// Subpackages: array (the float32 array stages), jpegturbo (libjpeg-turbo,
// loaded at run time), progressive (scan trimming and sequential rewriting
// of progressive JPEGs), jpegmarker (a JPEG marker walker), pngfast (the
// fast PNG encoding), libwebp (the WebP encoder, loaded at run time) and
// npy (.npy files).
//
// Images are flat 8-bit interleaved buffers (see Image) with C = 1 or C = 3
// and a row stride that may exceed W·C: destinations may be page-locked
// buffers with padding, and the padding bytes are never written.
//
// Every function runs on the calling goroutine only. The engine parallelises
// across images; parallelising inside a stage as well would oversubscribe the
// cores (which is why imaging's transforms, which spawn GOMAXPROCS goroutines
// per call, are not used here).
//
// The pixel stages other than Orient have no error result: the pipeline
// planner validates shapes and parameters before anything runs, so a
// mismatch reaching them is a programming error and they panic with a
// message naming the stage.
package stages
