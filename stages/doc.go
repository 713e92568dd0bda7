// Package stages holds the CPU reference implementation of every imgpipe
// stage: decode, grayscale, blur, boxblur, transpose, histogram and save.
//
// The functions here define the bits. The GPU kernels in cudastage must
// reproduce them exactly, so every formula follows the "Reference semantics"
// of DESIGN.md to the letter and uses integer arithmetic only (the blur taps
// are computed once in float64, as the contract says).
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
// The pixel stages (Grayscale, Blur, BoxBlur, Transpose, Histogram) have no
// error result: the pipeline planner validates shapes and parameters before
// anything runs, so a mismatch reaching them is a programming error and they
// panic with a message naming the stage.
package stages
