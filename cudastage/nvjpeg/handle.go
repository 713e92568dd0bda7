package nvjpeg

import (
	"errors"
	"fmt"
	"sync"
	"unsafe"
)

// Backend is an nvjpegBackend_t.
type Backend int

// The backends imgpipe uses. NVJPEG_BACKEND_DEFAULT is deliberately absent:
// for batched work it is far slower than the hardware engines
// (bench/results/2026-12-07-code-comments.md#cudastagenvjpeg).
const (
	// BackendGPUHybrid decodes Huffman on the GPU ("the CUDA decoder").
	BackendGPUHybrid Backend = 2
	// BackendHardware is the hardware JPEG engines (A100, H100, H200, ...).
	BackendHardware Backend = 3
)

// String names the backend as nvjpeg.h does.
func (b Backend) String() string {
	switch b {
	case BackendGPUHybrid:
		return "NVJPEG_BACKEND_GPU_HYBRID"
	case BackendHardware:
		return "NVJPEG_BACKEND_HARDWARE"
	}
	return fmt.Sprintf("NVJPEG_BACKEND_%d", int(b))
}

// Creation flags (nvjpegCreateEx).
const (
	// flagBitstreamStrict (NVJPEG_FLAGS_BITSTREAM_STRICT) makes nvJPEG refuse
	// streams that break the standard instead of decoding what it can: a
	// corrupt file fails with its reason rather than giving garbage pixels.
	flagBitstreamStrict = 1 << 2
)

// Handle is an nvJPEG library handle (nvjpegHandle_t) for one backend.
//
// Memory: the handle uses nvJPEG's default allocators (cudaMalloc and
// cudaHostAlloc in the current context). nvJPEG keeps its buffers per state
// and grows them when a larger batch comes ("smart allocations"); each
// allocation is padded (devicePadding, pinnedPadding) so that batches a little
// larger than the last reuse them instead of reallocating, which would free
// the old buffers and so wait for the device. A custom pool would save little
// more, and allocator hooks would be Go callbacks entered on nvJPEG's own
// threads, outside any bound, locked goroutine.
//
// Threads: create, use and destroy a Handle with the device's primary
// context current (cudastage's GPU.Do or a bound goroutine): nvJPEG calls the
// CUDA runtime, which uses the context current on the calling thread. A
// Handle may be used from several threads; the states made from it may not.
type Handle struct {
	h       uintptr
	backend Backend
	// batched admits one batched call (nvjpegDecodeBatchedInitialize or
	// nvjpegDecodeBatched) at a time, whatever the decoder state: on the
	// H200, four states calling nvjpegDecodeBatched at once from four
	// threads all hung inside the call, and one call at a time decodes as
	// fast (bench/results/2026-12-07-code-comments.md#cudastagenvjpeg).
	batched sync.Mutex
}

// NewHandle creates a handle with strict bitstream checking.
func NewHandle(b Backend) (*Handle, error) {
	l, err := get()
	if err != nil {
		return nil, err
	}
	var h uintptr
	if err := call("nvjpegCreateEx", l.createEx, uintptr(b), 0, 0, flagBitstreamStrict, uintptr(unsafe.Pointer(&h))); err != nil {
		return nil, err
	}
	err = errors.Join(call("nvjpegSetDeviceMemoryPadding", l.devicePadding, devicePadding, h),
		call("nvjpegSetPinnedMemoryPadding", l.pinnedPadding, pinnedPadding, h))
	if err != nil {
		call("nvjpegDestroy", l.destroy, h)
		return nil, err
	}
	return &Handle{h: h, backend: b}, nil
}

// The padding of nvJPEG's allocations (see Handle): what DALI uses by default
// for its nvJPEG decoders.
const (
	devicePadding = 16 << 20
	pinnedPadding = 8 << 20
)

// Backend returns the handle's backend.
func (h *Handle) Backend() Backend { return h.backend }

// Destroy releases the handle; every state, stream and decoder made from it
// must have been destroyed first.
func (h *Handle) Destroy() error {
	if h == nil || h.h == 0 {
		return errors.New("nvjpeg: Destroy of a nil handle")
	}
	l, _ := get() // a Handle exists only after a successful load
	err := call("nvjpegDestroy", l.destroy, h.h)
	h.h = 0
	return err
}

// HardwareInfo returns the number of hardware decode engines and cores per
// engine that a BackendHardware handle drives.
func (h *Handle) HardwareInfo() (engines, cores int, err error) {
	l, _ := get()
	var e, c uint32
	if err := call("nvjpegGetHardwareDecoderInfo", l.hwInfo, h.h, uintptr(unsafe.Pointer(&e)), uintptr(unsafe.Pointer(&c))); err != nil {
		return 0, 0, err
	}
	return int(e), int(c), nil
}
