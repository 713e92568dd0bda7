package main

// The kernel stage (a user's CUDA kernel) registers itself into pipeline.Builtin from a
// package of its own, so that the engine core links no NVRTC; the CLI offers it.
import _ "github.com/imgpipe/imgpipe/pipeline/kernelstage"
