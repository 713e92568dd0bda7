package nvjpeg

import (
	"errors"
	"runtime"
	"unsafe"
)

// Stream is a parsed JPEG (nvjpegJpegStream_t): what nvJPEG learned from a
// file's markers, on the host. A Stream is reused from file to file; it is
// not safe for concurrent use.
type Stream struct {
	s uintptr
	h *Handle
}

// NewStream creates a parse stream for handle h.
func (h *Handle) NewStream() (*Stream, error) {
	l, err := get()
	if err != nil {
		return nil, err
	}
	var s uintptr
	if err := call("nvjpegJpegStreamCreate", l.streamCreate, h.h, uintptr(unsafe.Pointer(&s))); err != nil {
		return nil, err
	}
	return &Stream{s: s, h: h}, nil
}

// Destroy releases the stream.
func (s *Stream) Destroy() error {
	l, _ := get()
	err := call("nvjpegJpegStreamDestroy", l.streamDestroy, s.s)
	s.s = 0
	return err
}

// errEmpty refuses empty data before nvJPEG sees a nil pointer.
var errEmpty = errors.New("nvjpeg: empty data")

// Parse reads the whole file (markers and entropy-coded data), as the
// decoupled decoders need.
func (s *Stream) Parse(data []byte) error {
	if len(data) == 0 {
		return errEmpty
	}
	l, _ := get()
	err := call("nvjpegJpegStreamParse", l.streamParse, s.h.h, uintptr(unsafe.Pointer(&data[0])), uintptr(len(data)), 0, 0, s.s)
	runtime.KeepAlive(data)
	return err
}

// ParseHeader reads the markers up to the first scan: enough for the size,
// the components and whether a decoder supports the file.
func (s *Stream) ParseHeader(data []byte) error {
	if len(data) == 0 {
		return errEmpty
	}
	l, _ := get()
	err := call("nvjpegJpegStreamParseHeader", l.streamParseHeader, s.h.h, uintptr(unsafe.Pointer(&data[0])), uintptr(len(data)), s.s)
	runtime.KeepAlive(data)
	return err
}

// Size returns the frame's stored width and height (before any EXIF
// orientation).
func (s *Stream) Size() (w, h int, err error) {
	l, _ := get()
	var uw, uh uint32
	if err := call("nvjpegJpegStreamGetFrameDimensions", l.frameDims, s.s, uintptr(unsafe.Pointer(&uw)), uintptr(unsafe.Pointer(&uh))); err != nil {
		return 0, 0, err
	}
	return int(uw), int(uh), nil
}

// BatchedSupported asks nvJPEG whether the parsed file can go to batched
// decode on the stream's handle (for a BackendHardware handle: the hardware
// engines). nvJPEG answers 0 for "supported".
func (s *Stream) BatchedSupported() (bool, error) {
	l, _ := get()
	var r int32 = -1
	if err := call("nvjpegDecodeBatchedSupported", l.batchedSupport, s.h.h, s.s, uintptr(unsafe.Pointer(&r))); err != nil {
		return false, err
	}
	return r == 0, nil
}
