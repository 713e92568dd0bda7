package nvjpeg

import (
	"fmt"
	"sync"
	"unsafe"

	"github.com/ebitengine/purego"

	"github.com/imgpipe/imgpipe/dynlib"
)

// Spec is how nvJPEG is found (see package dynlib for the search order).
// RTLD_GLOBAL: nvJPEG and the other CUDA libraries of a process share the
// CUDA runtime's symbols.
var Spec = dynlib.Spec{
	Name:      "nvJPEG",
	Env:       "IMGPIPE_NVJPEG",
	Sonames:   []string{"libnvjpeg.so.13", "libnvjpeg.so.12"},
	WheelDirs: []string{"nvidia/nvjpeg/lib", "nvidia/cu13/lib"},
	Global:    true,
	Hint:      "install the CUDA toolkit's libnvjpeg (CUDA 12 or 13) or the nvidia-nvjpeg pip wheel",
}

// lib holds the entry points of one opened libnvjpeg.
type lib struct {
	path string

	getProperty, createEx, destroy, hwInfo                          uintptr
	devicePadding, pinnedPadding                                    uintptr
	stateCreate, stateDestroy, batchedInit, batched, batchedSupport uintptr
	streamCreate, streamDestroy, streamParse, streamParseHeader     uintptr
	frameDims                                                       uintptr
	paramsCreate, paramsDestroy, paramsSetFormat                    uintptr
	decoderCreate, decoderDestroy, decoderSupported                 uintptr
	decoderStateCreate, pinnedCreate, pinnedDestroy                 uintptr
	deviceCreate, deviceDestroy, attachPinned, attachDevice         uintptr
	decodeHost, decodeTransfer, decodeDevice                        uintptr
	encStateCreate, encStateDestroy, encParamsCreate                uintptr
	encParamsDestroy, encSetQuality, encSetSampling                 uintptr
	encodeImage, encodeYUV, encodeRetrieve                          uintptr
}

// symbols pairs each entry point with its exported name.
func (l *lib) symbols() map[string]*uintptr {
	return map[string]*uintptr{
		"nvjpegGetProperty":                     &l.getProperty,
		"nvjpegCreateEx":                        &l.createEx,
		"nvjpegDestroy":                         &l.destroy,
		"nvjpegGetHardwareDecoderInfo":          &l.hwInfo,
		"nvjpegSetDeviceMemoryPadding":          &l.devicePadding,
		"nvjpegSetPinnedMemoryPadding":          &l.pinnedPadding,
		"nvjpegJpegStateCreate":                 &l.stateCreate,
		"nvjpegJpegStateDestroy":                &l.stateDestroy,
		"nvjpegDecodeBatchedInitialize":         &l.batchedInit,
		"nvjpegDecodeBatched":                   &l.batched,
		"nvjpegDecodeBatchedSupported":          &l.batchedSupport,
		"nvjpegJpegStreamCreate":                &l.streamCreate,
		"nvjpegJpegStreamDestroy":               &l.streamDestroy,
		"nvjpegJpegStreamParse":                 &l.streamParse,
		"nvjpegJpegStreamParseHeader":           &l.streamParseHeader,
		"nvjpegJpegStreamGetFrameDimensions":    &l.frameDims,
		"nvjpegDecodeParamsCreate":              &l.paramsCreate,
		"nvjpegDecodeParamsDestroy":             &l.paramsDestroy,
		"nvjpegDecodeParamsSetOutputFormat":     &l.paramsSetFormat,
		"nvjpegDecoderCreate":                   &l.decoderCreate,
		"nvjpegDecoderDestroy":                  &l.decoderDestroy,
		"nvjpegDecoderJpegSupported":            &l.decoderSupported,
		"nvjpegDecoderStateCreate":              &l.decoderStateCreate,
		"nvjpegBufferPinnedCreate":              &l.pinnedCreate,
		"nvjpegBufferPinnedDestroy":             &l.pinnedDestroy,
		"nvjpegBufferDeviceCreate":              &l.deviceCreate,
		"nvjpegBufferDeviceDestroy":             &l.deviceDestroy,
		"nvjpegStateAttachPinnedBuffer":         &l.attachPinned,
		"nvjpegStateAttachDeviceBuffer":         &l.attachDevice,
		"nvjpegDecodeJpegHost":                  &l.decodeHost,
		"nvjpegDecodeJpegTransferToDevice":      &l.decodeTransfer,
		"nvjpegDecodeJpegDevice":                &l.decodeDevice,
		"nvjpegEncoderStateCreate":              &l.encStateCreate,
		"nvjpegEncoderStateDestroy":             &l.encStateDestroy,
		"nvjpegEncoderParamsCreate":             &l.encParamsCreate,
		"nvjpegEncoderParamsDestroy":            &l.encParamsDestroy,
		"nvjpegEncoderParamsSetQuality":         &l.encSetQuality,
		"nvjpegEncoderParamsSetSamplingFactors": &l.encSetSampling,
		"nvjpegEncodeImage":                     &l.encodeImage,
		"nvjpegEncodeYUV":                       &l.encodeYUV,
		"nvjpegEncodeRetrieveBitstream":         &l.encodeRetrieve,
	}
}

// Load finds and opens nvJPEG (once; later calls return the first result).
// The error is dynlib's, listing every place tried, or names a missing
// entry point (a library older than CUDA 12).
func Load() error {
	_, err := get()
	return err
}

// Path returns the library that Load opened ("" before, or when it failed).
func Path() string {
	l, err := get()
	if err != nil {
		return ""
	}
	return l.path
}

// get opens the library once per process; later calls return the same result.
var get = sync.OnceValues(func() (*lib, error) { return open(Spec) })

// open loads the library s finds and resolves every entry point.
func open(s dynlib.Spec) (*lib, error) {
	dl, err := dynlib.Open(s)
	if err != nil {
		return nil, err
	}
	l := &lib{path: dl.Path}
	for name, dst := range l.symbols() {
		if *dst, err = dl.Sym(name); err != nil {
			return nil, fmt.Errorf("nvJPEG too old (CUDA 12 or newer needed): %w", err)
		}
	}
	return l, nil
}

// call invokes an nvJPEG entry point and turns its status into an *Error
// naming the call. Pointers go in the argument list itself as
// uintptr(unsafe.Pointer(&x)): uintptrescapes keeps them alive and on the
// heap until the call returns.
//
//go:uintptrescapes
func call(name string, fn uintptr, args ...uintptr) error {
	r, _, _ := purego.SyscallN(fn, args...)
	if s := Status(int32(uint32(r))); s != StatusSuccess {
		return &Error{Call: name, Status: s}
	}
	return nil
}

// libraryPropertyType values (library_types.h).
const (
	propMajor = 0
	propMinor = 1
	propPatch = 2
)

// Version returns the library's version, e.g. "13.0.1".
func Version() (string, error) {
	l, err := get()
	if err != nil {
		return "", err
	}
	var v [3]int32
	for i, p := range []uintptr{propMajor, propMinor, propPatch} {
		if err := call("nvjpegGetProperty", l.getProperty, p, uintptr(unsafe.Pointer(&v[i]))); err != nil {
			return "", err
		}
	}
	return fmt.Sprintf("%d.%d.%d", v[0], v[1], v[2]), nil
}
