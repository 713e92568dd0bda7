// Package nvrtc compiles CUDA C++ source at run time with NVIDIA's runtime
// compiler, libnvrtc, loaded through dynlib (no cgo, no toolkit at build
// time), and caches the compiled code on disk.
//
// NVRTC needs no GPU: it only turns source into PTX or CUBIN for a named
// architecture, so compilation (and its errors) can be checked on any machine
// that has the library. Loading the result is package cu's business.
package nvrtc

import (
	"fmt"
	"sync"
	"unsafe"

	"github.com/ebitengine/purego"

	"github.com/imgpipe/imgpipe/dynlib"
)

// Spec is how libnvrtc is found: IMGPIPE_NVRTC overrides; else CUDA 13's or
// 12's library in the loader's path, the toolkit's folders or pip wheels.
// RTLD_GLOBAL because libnvrtc opens libnvrtc-builtins itself.
var Spec = dynlib.Spec{
	Name:      "NVRTC",
	Env:       "IMGPIPE_NVRTC",
	Sonames:   []string{"libnvrtc.so.13", "libnvrtc.so.12"},
	WheelDirs: []string{"nvidia/cuda_nvrtc/lib", "nvidia/cu13/lib"},
	Global:    true,
	Hint:      "install the CUDA toolkit's NVRTC (libnvrtc) or the nvidia-cuda-nvrtc wheel",
}

// Result codes of nvrtcResult that the package tells apart.
const (
	codeSuccess     = 0
	codeCompilation = 6 // NVRTC_ERROR_COMPILATION: the source has errors, the log says which
)

// library holds the entry points of one opened libnvrtc.
type library struct {
	path         string
	major, minor int

	getErrorString, version, getNumSupportedArchs, getSupportedArchs uintptr
	createProgram, destroyProgram, compileProgram                    uintptr
	getProgramLogSize, getProgramLog, getCUBINSize, getCUBIN         uintptr
}

// load opens libnvrtc once per process; later calls return the same result.
var load = sync.OnceValues(func() (*library, error) { return open(Spec) })

// open opens the library spec finds and resolves every entry point the
// package uses; it is separate from load so tests can try other specs.
func open(spec dynlib.Spec) (*library, error) {
	lib, err := dynlib.Open(spec)
	if err != nil {
		return nil, err
	}
	l := &library{path: lib.Path}
	for _, s := range []struct {
		dst  *uintptr
		name string
	}{
		{&l.getErrorString, "nvrtcGetErrorString"},
		{&l.version, "nvrtcVersion"},
		{&l.getNumSupportedArchs, "nvrtcGetNumSupportedArchs"},
		{&l.getSupportedArchs, "nvrtcGetSupportedArchs"},
		{&l.createProgram, "nvrtcCreateProgram"},
		{&l.destroyProgram, "nvrtcDestroyProgram"},
		{&l.compileProgram, "nvrtcCompileProgram"},
		{&l.getProgramLogSize, "nvrtcGetProgramLogSize"},
		{&l.getProgramLog, "nvrtcGetProgramLog"},
		{&l.getCUBINSize, "nvrtcGetCUBINSize"},
		{&l.getCUBIN, "nvrtcGetCUBIN"},
	} {
		if *s.dst, err = lib.Sym(s.name); err != nil {
			return nil, fmt.Errorf("NVRTC: %w (NVRTC 11.1 or newer is needed)", err)
		}
	}
	var major, minor int32
	if err := l.call("nvrtcVersion", l.version, uintptr(unsafe.Pointer(&major)), uintptr(unsafe.Pointer(&minor))); err != nil {
		return nil, err
	}
	l.major, l.minor = int(major), int(minor)
	return l, nil
}

// Error is a failed NVRTC call other than a compilation error (those are
// *CompileError).
type Error struct {
	Call string // "nvrtcCreateProgram"
	Code int    // the nvrtcResult
	Msg  string // NVRTC's description of Code
}

func (e *Error) Error() string { return fmt.Sprintf("%s: %s (nvrtcResult %d)", e.Call, e.Msg, e.Code) }

// call invokes an entry point and turns a non-zero nvrtcResult into *Error.
// Pointers are passed as uintptr(unsafe.Pointer(&x)) in the argument list
// itself; uintptrescapes keeps them alive until the call returns.
//
//go:uintptrescapes
func (l *library) call(name string, fn uintptr, args ...uintptr) error {
	r, _, _ := purego.SyscallN(fn, args...)
	if code := int(int32(uint32(r))); code != codeSuccess {
		return &Error{Call: name, Code: code, Msg: l.errorString(code)}
	}
	return nil
}

func (l *library) errorString(code int) string {
	r, _, _ := purego.SyscallN(l.getErrorString, uintptr(code))
	if r == 0 {
		return "unknown error"
	}
	return goString(*(**byte)(unsafe.Pointer(&r)))
}

// goString copies a NUL-terminated C string owned by NVRTC (a static
// message), reading no further than its NUL or 4 KiB.
func goString(p *byte) string {
	n := 0
	for n < 4<<10 && *(*byte)(unsafe.Add(unsafe.Pointer(p), n)) != 0 {
		n++
	}
	return string(unsafe.Slice(p, n))
}

// supportedArchs lists the sm_XY values (as 10·X+Y) this NVRTC compiles for.
func (l *library) supportedArchs() ([]int, error) {
	var n int32
	if err := l.call("nvrtcGetNumSupportedArchs", l.getNumSupportedArchs, uintptr(unsafe.Pointer(&n))); err != nil {
		return nil, err
	}
	if n <= 0 {
		return nil, nil
	}
	archs := make([]int32, n)
	if err := l.call("nvrtcGetSupportedArchs", l.getSupportedArchs, uintptr(unsafe.Pointer(&archs[0]))); err != nil {
		return nil, err
	}
	out := make([]int, n)
	for i, a := range archs {
		out[i] = int(a)
	}
	return out, nil
}

// Info describes the NVRTC library found, for `imgpipe devices`.
type Info struct {
	Version string `json:"version"` // "13.0"
	Path    string `json:"path"`    // the file (or soname) that opened
	// Archs are the sm_XY this NVRTC compiles for, as 10·X+Y.
	Archs []int `json:"archs"`
}

// Probe loads NVRTC and describes it, or says why it cannot be used.
func Probe() (Info, error) {
	l, err := load()
	if err != nil {
		return Info{}, err
	}
	archs, err := l.supportedArchs()
	if err != nil {
		return Info{}, err
	}
	return Info{Version: fmt.Sprintf("%d.%d", l.major, l.minor), Path: l.path, Archs: archs}, nil
}
