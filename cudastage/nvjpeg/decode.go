package nvjpeg

import (
	"errors"
	"fmt"
	"runtime"
	"unsafe"

	"github.com/imgpipe/imgpipe/cudastage/cu"
)

// outputRGBI is NVJPEG_OUTPUT_RGBI: interleaved RGB in channel 0.
const outputRGBI = 5

// image mirrors nvjpegImage_t: NVJPEG_MAX_COMPONENT (4) channel pointers,
// then 4 pitches (size_t). Interleaved output uses channel 0 only.
type image struct {
	channel [4]uint64
	pitch   [4]uint64
}

// Dst is where one decoded image goes: W·3 bytes per row (RGBI), rows Pitch
// bytes apart, starting at device address Ptr.
type Dst struct {
	Ptr   cu.DevicePtr
	Pitch int
}

func (d Dst) image() image {
	return image{channel: [4]uint64{uint64(d.Ptr)}, pitch: [4]uint64{uint64(d.Pitch)}}
}

// BatchDecoder decodes batches of files with one nvjpegDecodeBatched call
// each, on a BackendHardware handle: the files are spread over the hardware
// engines. It is not safe for concurrent use; make one per CUDA stream.
//
// A call returns before the device finished it, and the state's buffers
// (the files' staging, the engines' work) serve every call: so each call,
// and each re-initialisation for another batch size, first waits for the
// previous call's work (the event done, recorded after it). Re-initialising
// a state whose decode was still running hung the H200's engines.
type BatchDecoder struct {
	h     *Handle
	state uintptr
	size  int      // the batch size nvjpegDecodeBatchedInitialize was last given; 0: none
	done  cu.Event // recorded after each call
	busy  bool     // done was recorded and not yet waited for
}

// NewBatchDecoder creates a decoder state for batched decoding.
func (h *Handle) NewBatchDecoder() (*BatchDecoder, error) {
	l, err := get()
	if err != nil {
		return nil, err
	}
	done, err := cu.EventCreate(false)
	if err != nil {
		return nil, err
	}
	var st uintptr
	if err := call("nvjpegJpegStateCreate", l.stateCreate, h.h, uintptr(unsafe.Pointer(&st))); err != nil {
		return nil, errors.Join(err, done.Destroy())
	}
	return &BatchDecoder{h: h, state: st, done: done}, nil
}

// Destroy releases the state; work queued with it must be finished.
func (d *BatchDecoder) Destroy() error {
	l, _ := get()
	err := errors.Join(call("nvjpegJpegStateDestroy", l.stateDestroy, d.state), d.done.Destroy())
	d.state = 0
	return err
}

// idle waits until the device finished the previous call's work.
func (d *BatchDecoder) idle() error {
	if !d.busy {
		return nil
	}
	d.busy = false
	return d.done.Synchronize()
}

// Initialized is the batch size the state is set up for (see Initialize),
// 0 when none.
func (d *BatchDecoder) Initialized() int { return d.size }

// Initialize announces batches of n files (nvjpegDecodeBatchedInitialize)
// unless the state is set up for n already. Decode calls it; calling it
// ahead, on a stream's decoder before the first batch, moves nvJPEG's
// one-time setup of the state out of the first decode.
func (d *BatchDecoder) Initialize(n int) error {
	if err := d.idle(); err != nil {
		return err
	}
	d.h.batched.Lock()
	defer d.h.batched.Unlock()
	return d.initialize(n)
}

// initialize is Initialize for a caller that waited for the previous call
// and holds the handle's batched lock.
func (d *BatchDecoder) initialize(n int) error {
	if n < 1 {
		return fmt.Errorf("nvjpeg: a batch of %d files", n)
	}
	if d.size == n {
		return nil
	}
	l, err := get()
	if err != nil {
		return err
	}
	if err := call("nvjpegDecodeBatchedInitialize", l.batchedInit, d.h.h, d.state, uintptr(n), 1, outputRGBI); err != nil {
		d.size = 0
		return err
	}
	d.size = n
	return nil
}

// Decode queues the decoding of files[i] into dst[i] as interleaved RGB on
// stream s. Every file must be one that Stream.BatchedSupported accepted and
// dst[i] must hold its stored (unoriented) size. nvJPEG needs the batch size
// announced before a call (nvjpegDecodeBatchedInitialize), so a call of
// another size than the last re-initialises the state, as does the first
// call after a failed one (nvJPEG's documented way to reset a failed batch).
// The files must stay unchanged until the stream's work is done.
func (d *BatchDecoder) Decode(files [][]byte, dst []Dst, s cu.Stream) error {
	n := len(files)
	switch {
	case n == 0:
		return nil
	case len(dst) != n:
		return fmt.Errorf("nvjpeg: %d files but %d destinations", n, len(dst))
	}
	l, _ := get()
	ptrs := make([]uintptr, n)
	lens := make([]uint64, n)
	imgs := make([]image, n)
	for i, f := range files {
		if len(f) == 0 {
			return fmt.Errorf("nvjpeg: file %d: %w", i, errEmpty)
		}
		ptrs[i], lens[i], imgs[i] = uintptr(unsafe.Pointer(&f[0])), uint64(len(f)), dst[i].image()
	}
	if err := d.idle(); err != nil {
		return err
	}
	d.h.batched.Lock()
	err := d.initialize(n)
	if err == nil {
		err = call("nvjpegDecodeBatched", l.batched, d.h.h, d.state,
			uintptr(unsafe.Pointer(&ptrs[0])), uintptr(unsafe.Pointer(&lens[0])), uintptr(unsafe.Pointer(&imgs[0])), uintptr(s))
	}
	d.h.batched.Unlock()
	runtime.KeepAlive(files)
	if err != nil {
		d.size = 0
	}
	if rerr := d.done.Record(s); rerr != nil {
		return errors.Join(err, rerr)
	}
	d.busy = true
	return err
}

// ImageDecoder decodes one file at a time with nvJPEG's decoupled API
// (host phase, transfer, device phase) on a decoder of a given backend. It
// is not safe for concurrent use; make one per CUDA stream.
//
// The host phase writes into a page-locked buffer that the transfer reads
// asynchronously, so the decoder alternates between two of them and waits,
// before reusing one, for the event recorded after its last transfer: the
// next file's host phase overlaps the previous file's transfer and device
// phase.
type ImageDecoder struct {
	h       *Handle
	backend Backend
	dec     uintptr
	state   uintptr
	params  uintptr
	device  uintptr
	pinned  [2]uintptr
	done    [2]cu.Event
	next    int
	js      *Stream
}

// NewImageDecoder creates a decoder with backend b (BackendGPUHybrid: the
// CUDA decoder), its state, buffers and parse stream. Output is RGBI;
// CMYK files are not accepted (nvJPEG's CMYK conversion is a plain
// subtractive one that does not match the CPU decoders').
func (h *Handle) NewImageDecoder(b Backend) (d *ImageDecoder, err error) {
	l, err := get()
	if err != nil {
		return nil, err
	}
	d = &ImageDecoder{h: h, backend: b}
	defer func() {
		if err != nil {
			err = errors.Join(err, d.Destroy())
			d = nil
		}
	}()
	if err := call("nvjpegDecoderCreate", l.decoderCreate, h.h, uintptr(b), uintptr(unsafe.Pointer(&d.dec))); err != nil {
		return nil, err
	}
	if err := call("nvjpegDecoderStateCreate", l.decoderStateCreate, h.h, d.dec, uintptr(unsafe.Pointer(&d.state))); err != nil {
		return nil, err
	}
	if err := call("nvjpegDecodeParamsCreate", l.paramsCreate, h.h, uintptr(unsafe.Pointer(&d.params))); err != nil {
		return nil, err
	}
	if err := call("nvjpegBufferDeviceCreate", l.deviceCreate, h.h, 0, uintptr(unsafe.Pointer(&d.device))); err != nil {
		return nil, err
	}
	for i := range d.pinned {
		if err := call("nvjpegBufferPinnedCreate", l.pinnedCreate, h.h, 0, uintptr(unsafe.Pointer(&d.pinned[i]))); err != nil {
			return nil, err
		}
	}
	if err := call("nvjpegDecodeParamsSetOutputFormat", l.paramsSetFormat, d.params, outputRGBI); err != nil {
		return nil, err
	}
	if err := call("nvjpegStateAttachDeviceBuffer", l.attachDevice, d.state, d.device); err != nil {
		return nil, err
	}
	for i := range d.done {
		if d.done[i], err = cu.EventCreate(false); err != nil {
			return nil, err
		}
	}
	if d.js, err = h.NewStream(); err != nil {
		return nil, err
	}
	return d, nil
}

// Destroy releases everything the decoder holds; work queued with it must
// be finished. It is safe on a partly built decoder.
func (d *ImageDecoder) Destroy() error {
	l, _ := get()
	var errs []error
	free := func(name string, fn uintptr, h *uintptr) {
		if *h != 0 {
			errs = append(errs, call(name, fn, *h))
			*h = 0
		}
	}
	if d.js != nil {
		errs = append(errs, d.js.Destroy())
		d.js = nil
	}
	for i := range d.done {
		if d.done[i] != 0 {
			errs = append(errs, d.done[i].Destroy())
			d.done[i] = 0
		}
	}
	free("nvjpegJpegStateDestroy", l.stateDestroy, &d.state)
	free("nvjpegBufferPinnedDestroy", l.pinnedDestroy, &d.pinned[0])
	free("nvjpegBufferPinnedDestroy", l.pinnedDestroy, &d.pinned[1])
	free("nvjpegBufferDeviceDestroy", l.deviceDestroy, &d.device)
	free("nvjpegDecodeParamsDestroy", l.paramsDestroy, &d.params)
	free("nvjpegDecoderDestroy", l.decoderDestroy, &d.dec)
	return errors.Join(errs...)
}

// Supported reports whether the decoder takes the file parsed into js (a
// Stream of the same handle), with this decoder's output settings. nvJPEG
// answers 0 for "supported".
func (d *ImageDecoder) Supported(js *Stream) (bool, error) {
	l, _ := get()
	var r int32 = -1
	if err := call("nvjpegDecoderJpegSupported", l.decoderSupported, d.dec, js.s, d.params, uintptr(unsafe.Pointer(&r))); err != nil {
		return false, err
	}
	return r == 0, nil
}

// Decode queues the decoding of file into dst (its stored size, RGBI) on
// stream s. The host phase runs here; the rest is queued. The file must stay
// unchanged until the stream's work is done.
func (d *ImageDecoder) Decode(file []byte, dst Dst, s cu.Stream) error {
	l, _ := get()
	if err := d.js.Parse(file); err != nil {
		return err
	}
	if ok, err := d.Supported(d.js); err != nil || !ok {
		if err == nil {
			err = &Error{Call: "nvjpegDecoderJpegSupported", Status: StatusJPEGNotSupported}
		}
		return err
	}
	k := d.next
	d.next = 1 - k
	// The host phase overwrites pinned buffer k: its last transfer must be
	// over.
	if err := d.done[k].Synchronize(); err != nil {
		return err
	}
	if err := call("nvjpegStateAttachPinnedBuffer", l.attachPinned, d.state, d.pinned[k]); err != nil {
		return err
	}
	if err := call("nvjpegDecodeJpegHost", l.decodeHost, d.h.h, d.dec, d.state, d.params, d.js.s); err != nil {
		return err
	}
	if err := call("nvjpegDecodeJpegTransferToDevice", l.decodeTransfer, d.h.h, d.dec, d.state, d.js.s, uintptr(s)); err != nil {
		return err
	}
	if err := d.done[k].Record(s); err != nil {
		return err
	}
	img := dst.image()
	return call("nvjpegDecodeJpegDevice", l.decodeDevice, d.h.h, d.dec, d.state, uintptr(unsafe.Pointer(&img)), uintptr(s))
}

// imagesPerCore is how many files one batched call gives each hardware
// core: several, so that the engines stay busy while the host parses and
// the call's fixed cost is spread. BenchmarkBatchedDecode's call-size
// sweep is where to measure it again.
const imagesPerCore = 8

// BatchCapacity is the number of files per batched call for a GPU with the
// given hardware engines and cores per engine (HardwareInfo); 0 without
// engines.
func BatchCapacity(engines, cores int) int {
	return engines * max(cores, 1) * imagesPerCore
}
