package sched

import (
	"errors"
	"time"
)

// Stream is a device queue handle. Work enqueued on one stream runs in order;
// work on different streams may overlap.
type Stream uintptr

// Event is a device marker handle recorded on a stream; it completes when the
// stream reaches it, and carries a device timestamp.
type Event uintptr

// DevPtr is a device memory handle. The executor always pairs it with a byte
// offset instead of doing pointer arithmetic, so a device may use plain
// handles (the fake does) or real addresses (CUDA does).
type DevPtr uint64

// Device is what the executor needs from an accelerator: streams, events,
// page-locked host memory, device memory, async copies and the ops of a
// segment. The real one adapts the CUDA driver (package cudastage);
// schedtest.FakeDevice runs everything on the CPU, for tests.
//
// Threading: a CUDA context is current per OS thread. The executor calls
// BindThread on every goroutine that makes device calls, after
// runtime.LockOSThread, and makes all other calls on such goroutines. Apart
// from that rule, a Device must be safe for use from several goroutines.
//
// Errors: every error a Device returns is treated as fatal by the executor
// (it stops and reports that error), so a Device must not return errors for
// conditions the executor could continue from.
type Device interface {
	// Name identifies the device in traces and stats, e.g. "NVIDIA H200 #0".
	Name() string
	// BindThread makes the device current on the calling OS thread.
	BindThread() error

	NewStream() (Stream, error)
	DestroyStream(Stream) error
	// SyncStream blocks until all work enqueued on the stream has finished.
	SyncStream(Stream) error

	// NewEvent creates an event that records timestamps.
	NewEvent() (Event, error)
	DestroyEvent(Event) error
	// Record enqueues the event on the stream.
	Record(Event, Stream) error
	// StreamWait makes later work on the stream wait for the event's latest
	// recording (at the time of the call) to complete, without blocking the
	// host.
	StreamWait(Stream, Event) error
	// WaitEvent blocks until the event's latest recording completed, or
	// returns the device's error if the device failed.
	WaitEvent(Event) error
	// Elapsed is the device time between two completed events.
	Elapsed(start, end Event) (time.Duration, error)

	// HostAlloc returns n bytes of page-locked host memory: async copies only
	// overlap from such memory.
	HostAlloc(n int) ([]byte, error)
	HostFree([]byte) error
	// DevAlloc returns n bytes of device memory. The executor draws on
	// HostAlloc and DevAlloc through pools (HostAllocator, DeviceDriver); a
	// Device may implement OutOfMemory to say which errors mean out of
	// memory.
	DevAlloc(n int) (DevPtr, error)
	DevFree(DevPtr) error

	// HtoD enqueues a copy of src into dst+off. src comes from HostAlloc and
	// stays untouched until the copy completed; or, with Config.Pageable
	// only, it is ordinary memory, and HtoD copies synchronously after the
	// stream's earlier work (async copies must never read Go memory).
	HtoD(s Stream, dst DevPtr, off int, src []byte) error
	// DtoH enqueues a copy of len(dst) bytes from src+off into dst, with
	// HtoD's rules about dst's memory.
	DtoH(s Stream, dst []byte, src DevPtr, off int) error

	// CheckOp reports whether the device can run op with its arguments (the
	// CUDA device has a launcher for the op's stage and accepts its Args).
	// The executor asks before it allocates anything.
	CheckOp(op Op) error
	// TableBytes is the size of the launch table that EncodeTable writes for
	// op over n images (0 when the device needs none). The executor keeps a
	// page-locked copy and a device copy of every op's table per slot, and
	// uploads them with the batch's input.
	TableBytes(op Op, n int) int
	// ScratchBytes is the device scratch op needs over up to n images whose
	// source buffer holds up to srcCap bytes (0 when none). The executor
	// keeps one scratch buffer per stream, since a stream runs one op at a
	// time.
	ScratchBytes(op Op, srcCap, n int) int
	// EncodeTable writes call's launch table into dst (TableBytes long).
	EncodeTable(call *OpCall, dst []byte) error
	// Run enqueues call's op over all of call.Images on the stream.
	Run(s Stream, call *OpCall) error
}

// ErrNoSuchDevice is wrapped by a Starter's OpenErr when the device asked for
// does not exist (cudastage.ErrNoSuchGPU): a mistake in the request, which a
// run reports even where it could go on without the device.
var ErrNoSuchDevice = errors.New("no GPU")

// Starter is implemented by a Device that opens in the background once started
// (the CUDA device: the driver takes a few tenths of a second for a context).
// Start begins opening, once; Ready is closed once the device opened or failed
// to, and OpenErr then says which. Ready does not start the device; OpenErr and
// BindThread do, then wait for Ready (BindThread failing with OpenErr).
type Starter interface {
	Start()
	Ready() <-chan struct{}
	OpenErr() error
}

// Start starts each device that opens in the background (Starter); another device is
// open already.
func Start(devs ...Device) {
	for _, d := range devs {
		if s, ok := d.(Starter); ok {
			s.Start()
		}
	}
}

// Opened reports whether d is open: it opens at once (it is no Starter), or its
// Ready is closed.
func Opened(d Device) bool {
	s, ok := d.(Starter)
	if !ok {
		return true
	}
	select {
	case <-s.Ready():
		return true
	default:
		return false
	}
}

// OpImage places one image of a batch for one op.
type OpImage struct {
	In, Out Shape // the op's input and output shapes
	SrcOff  int   // byte offset of the input image in OpCall.Src
	DstOff  int   // byte offset of the output image in OpCall.Dst (unused by the histogram)
	HistOff int   // byte offset of the image's 256 little-endian uint64 counts in OpCall.Hist
	// ValueOff is the byte offset of a reduction's little-endian float32 in
	// OpCall.Values (Op.Reduce).
	ValueOff int
	// Dims are an array's axes (Op.Array; none for a 0-d array), nil for an
	// image: In is ArrayShape of their product.
	Dims []int
}

// OpCall is one batched launch: one op over every image of a batch. Images
// are tightly packed (row stride W·C) at the given offsets.
type OpCall struct {
	Op       Op
	Images   []OpImage
	Src, Dst DevPtr // Dst is 0 for the histogram
	// Hist receives the counts of a histogram op. A device must write every
	// count (zeroing first), since the buffer holds the previous batch's.
	Hist DevPtr
	// Values receives a reduction's values (Op.Reduce), one float32 per
	// array at OpImage.ValueOff.
	Values DevPtr
	// Table and TableOff locate the launch table written by EncodeTable,
	// already uploaded when the op runs.
	Table    DevPtr
	TableOff int
	// Scratch is the stream's scratch buffer (ScratchBytes long), or 0.
	Scratch DevPtr
	// Lens receives an encoding op's file lengths (Op.Encode): one
	// little-endian uint32 per image, in the order of Images. 0 otherwise.
	Lens DevPtr
}

// HistBytes is the size of one image's histogram on the device and in host
// memory: 256 little-endian uint64 counts.
const HistBytes = 256 * 8
