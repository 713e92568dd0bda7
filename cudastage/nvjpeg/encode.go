package nvjpeg

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"unsafe"

	"github.com/imgpipe/imgpipe/cudastage/cu"
)

// Subsampling is the chroma subsampling an Encoder writes
// (nvjpegChromaSubsampling_t).
type Subsampling int

// The subsamplings an Encoder offers.
const (
	Sub444  Subsampling = 0 // NVJPEG_CSS_444: full-resolution chroma
	Sub420  Subsampling = 2 // NVJPEG_CSS_420: chroma halved both ways (Go's image/jpeg writes this)
	SubGray Subsampling = 6 // NVJPEG_CSS_GRAY: luma only
)

// String names the subsampling as "4:4:4", "4:2:0" or "gray".
func (s Subsampling) String() string {
	switch s {
	case Sub444:
		return "4:4:4"
	case Sub420:
		return "4:2:0"
	case SubGray:
		return "gray"
	}
	return fmt.Sprintf("subsampling(%d)", int(s))
}

// inputRGBI is NVJPEG_INPUT_RGBI: interleaved RGB in channel 0.
const inputRGBI = 5

// maxJPEGSide is the largest width or height a JPEG frame header can hold.
const maxJPEGSide = 65535

// Binder makes the GPU's context current on the calling goroutine's locked
// OS thread until release is called (cudastage's *GPU implements it).
type Binder interface {
	Bind() (release func(), err error)
}

// Encoder encodes images to JPEG on the GPU with nvJPEG, for save workers:
// the pixels are copied into a page-locked buffer, uploaded on the
// encoder's own stream, encoded there, and the file comes back. An Encoder
// is safe for concurrent use but encodes one image at a time; give each save
// worker its own for parallel encodes.
type Encoder struct {
	bind Binder
	sub  Subsampling

	mu     sync.Mutex
	h      *Handle
	state  uintptr
	params uintptr
	stream cu.Stream
	host   []byte       // page-locked: the pixels going up, then the file coming back
	dev    cu.DevicePtr // the pixels on the device
	devCap int
}

// NewEncoder creates an encoder writing subsampling sub for RGB images (C =
// 1 images always give a gray JPEG). b binds the GPU's context.
func NewEncoder(b Binder, sub Subsampling) (e *Encoder, err error) {
	switch sub {
	case Sub444, Sub420, SubGray:
	default:
		return nil, fmt.Errorf("nvjpeg: encoder subsampling %v: want 4:4:4, 4:2:0 or gray", sub)
	}
	l, err := get()
	if err != nil {
		return nil, err
	}
	release, err := b.Bind()
	if err != nil {
		return nil, err
	}
	defer release()
	e = &Encoder{bind: b, sub: sub}
	defer func() {
		if err != nil {
			err = errors.Join(err, e.free())
			e = nil
		}
	}()
	if e.stream, err = cu.StreamCreate(true); err != nil {
		return nil, err
	}
	if e.h, err = NewHandle(BackendGPUHybrid); err != nil {
		return nil, err
	}
	if err := call("nvjpegEncoderStateCreate", l.encStateCreate, e.h.h, uintptr(unsafe.Pointer(&e.state)), uintptr(e.stream)); err != nil {
		return nil, err
	}
	if err := call("nvjpegEncoderParamsCreate", l.encParamsCreate, e.h.h, uintptr(unsafe.Pointer(&e.params)), uintptr(e.stream)); err != nil {
		return nil, err
	}
	return e, nil
}

// Close releases the encoder's GPU resources.
func (e *Encoder) Close() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	release, err := e.bind.Bind()
	if err != nil {
		return err
	}
	defer release()
	return e.free()
}

// free releases what exists, on a bound thread.
func (e *Encoder) free() error {
	l, _ := get()
	var errs []error
	if e.stream != 0 {
		errs = append(errs, e.stream.Synchronize())
	}
	if e.params != 0 {
		errs = append(errs, call("nvjpegEncoderParamsDestroy", l.encParamsDestroy, e.params))
		e.params = 0
	}
	if e.state != 0 {
		errs = append(errs, call("nvjpegEncoderStateDestroy", l.encStateDestroy, e.state))
		e.state = 0
	}
	if e.h != nil {
		errs = append(errs, e.h.Destroy())
		e.h = nil
	}
	errs = append(errs, e.freeBuffers())
	if e.stream != 0 {
		errs = append(errs, e.stream.Destroy())
		e.stream = 0
	}
	return errors.Join(errs...)
}

func (e *Encoder) freeBuffers() error {
	var errs []error
	if e.host != nil {
		errs = append(errs, cu.MemFreeHost(e.host))
		e.host = nil
	}
	if e.dev != 0 {
		errs = append(errs, cu.MemFree(e.dev))
		e.dev, e.devCap = 0, 0
	}
	return errors.Join(errs...)
}

// checkEncode validates Encode's arguments before anything is allocated.
func checkEncode(pix []byte, w, h, c, stride, quality int) error {
	switch {
	case c != 1 && c != 3:
		return fmt.Errorf("nvjpeg: encode: %d channels, want 1 or 3", c)
	case w < 1 || h < 1 || w > maxJPEGSide || h > maxJPEGSide:
		return fmt.Errorf("nvjpeg: encode: size %dx%d, want 1 to %d on each side", w, h, maxJPEGSide)
	case stride < w*c:
		return fmt.Errorf("nvjpeg: encode: stride %d is less than width×channels %d", stride, w*c)
	case len(pix) < (h-1)*stride+w*c:
		return fmt.Errorf("nvjpeg: encode: %d bytes of pixels, a %dx%dx%d image with stride %d needs %d", len(pix), w, h, c, stride, (h-1)*stride+w*c)
	case quality < 1 || quality > 100:
		return fmt.Errorf("nvjpeg: encode: quality %d, want 1 to 100", quality)
	}
	return nil
}

// grow makes the page-locked buffer at least host bytes and the device
// buffer at least dev bytes. The stream is idle between encodes, so the old
// buffers can go at once.
func (e *Encoder) grow(host, dev int) error {
	if len(e.host) < host {
		if e.host != nil {
			if err := cu.MemFreeHost(e.host); err != nil {
				return err
			}
			e.host = nil
		}
		b, err := cu.MemHostAlloc(host)
		if err != nil {
			return err
		}
		e.host = b
	}
	if e.devCap < dev {
		if e.dev != 0 {
			if err := cu.MemFree(e.dev); err != nil {
				return err
			}
			e.dev, e.devCap = 0, 0
		}
		p, err := cu.MemAlloc(uint64(dev))
		if err != nil {
			return err
		}
		e.dev, e.devCap = p, dev
	}
	return nil
}

// Encode returns the JPEG file of the w×h image with c channels (1 or 3)
// whose rows start stride bytes apart in pix, at quality 1..100.
func (e *Encoder) Encode(pix []byte, w, h, c, stride, quality int) ([]byte, error) {
	if err := checkEncode(pix, w, h, c, stride, quality); err != nil {
		return nil, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.h == nil {
		return nil, errors.New("nvjpeg: encode after Close")
	}
	release, err := e.bind.Bind()
	if err != nil {
		return nil, err
	}
	defer release()
	l, _ := get()
	row := w * c
	n := row * h
	if err := e.grow(n, n); err != nil {
		return nil, err
	}
	for y := range h {
		copy(e.host[y*row:(y+1)*row], pix[y*stride:])
	}
	if err := cu.MemcpyHtoDAsync(e.dev, e.host[:n], e.stream); err != nil {
		return nil, err
	}
	sub := e.sub
	if c == 1 {
		sub = SubGray
	}
	if err := call("nvjpegEncoderParamsSetQuality", l.encSetQuality, e.params, uintptr(quality), uintptr(e.stream)); err != nil {
		return nil, err
	}
	if err := call("nvjpegEncoderParamsSetSamplingFactors", l.encSetSampling, e.params, uintptr(sub), uintptr(e.stream)); err != nil {
		return nil, err
	}
	img := Dst{Ptr: e.dev, Pitch: row}.image()
	if c == 3 {
		err = call("nvjpegEncodeImage", l.encodeImage, e.h.h, e.state, e.params, uintptr(unsafe.Pointer(&img)), inputRGBI, uintptr(w), uintptr(h), uintptr(e.stream))
	} else {
		err = call("nvjpegEncodeYUV", l.encodeYUV, e.h.h, e.state, e.params, uintptr(unsafe.Pointer(&img)), uintptr(SubGray), uintptr(w), uintptr(h), uintptr(e.stream))
	}
	if err != nil {
		return nil, err
	}
	// The first retrieve only gives the length; the file then comes back
	// into the page-locked buffer (never into Go memory: the copy is async).
	var size uint64
	if err := call("nvjpegEncodeRetrieveBitstream", l.encodeRetrieve, e.h.h, e.state, 0, uintptr(unsafe.Pointer(&size)), uintptr(e.stream)); err != nil {
		return nil, err
	}
	if err := e.stream.Synchronize(); err != nil {
		return nil, err
	}
	if err := e.grow(int(size), 0); err != nil {
		return nil, err
	}
	if err := call("nvjpegEncodeRetrieveBitstream", l.encodeRetrieve, e.h.h, e.state, uintptr(unsafe.Pointer(&e.host[0])), uintptr(unsafe.Pointer(&size)), uintptr(e.stream)); err != nil {
		return nil, err
	}
	if err := e.stream.Synchronize(); err != nil {
		return nil, err
	}
	runtime.KeepAlive(e)
	return append([]byte(nil), e.host[:size]...), nil
}
