// Package nvjpeg binds NVIDIA's nvJPEG library, loaded at run time with
// purego (no build dependency, CGO_ENABLED=0), for the CUDA device's JPEG
// decoding and encoding.
//
// The library is found by package dynlib ([Spec]: IMGPIPE_NVJPEG, then
// libnvjpeg.so.13 and .so.12 through the loader, the CUDA toolkit's folders
// and the pip wheels). On a machine without it, [Load] and every constructor
// return dynlib's error, which lists every place tried.
//
// # Decoders
//
//   - [BatchDecoder]: nvjpegDecodeBatched on a [BackendHardware] handle, the
//     GPU's hardware JPEG engines ([Handle.HardwareInfo]). They take baseline,
//     single-scan JPEGs with 1 or 3 components (not 4:1:0 or 4:1:1);
//     [Stream.BatchedSupported] says which, after a parse, never a guess.
//   - [ImageDecoder]: the decoupled API (host phase, transfer, device phase)
//     on a [BackendGPUHybrid] decoder, one file at a time, for the JPEGs the
//     engines do not take.
//
// Both write interleaved RGB (NVJPEG_OUTPUT_RGBI, pitch W·3 when packed) at
// the file's stored size; gray files come out with R = G = B. Handles are
// created with NVJPEG_FLAGS_BITSTREAM_STRICT, so a corrupt stream fails with
// nvJPEG's reason ([Error], [IsBadInput]) instead of decoding to garbage.
//
// Exactness: nvJPEG's IDCT and chroma upsampling differ from libjpeg-turbo's
// and Go's, so its pixels differ slightly from the CPU decoders'. The GPU
// tests measure and bound the mean and maximum absolute difference against
// libjpeg-turbo per fixture; every stage after decode stays bit-exact
// between CPU and GPU for the same decoded pixels.
//
// # Threads and memory
//
// nvJPEG runs on the CUDA runtime, which uses the primary context current on
// the calling thread: call everything here with the device's primary context
// current (cudastage's GPU.Do or a bound goroutine), and pass the driver
// API's streams (a CUstream is a cudaStream_t). nvJPEG's own default
// allocators are used (see [Handle]).
//
// # Encoder
//
// [Encoder] encodes one image at a time on its own stream (quality 1..100,
// 4:2:0, 4:4:4 or gray), uploading through a page-locked buffer.
package nvjpeg
