package cu

import (
	"errors"
	"fmt"
	"sync"
	"unsafe"

	"github.com/ebitengine/purego"
)

// MinDriverVersion is the oldest driver API version accepted (CUDA 12.0).
const MinDriverVersion = 12000

// LibraryName is the driver library opened by Load.
const LibraryName = "libcuda.so.1"

// driver holds the entry points of one opened libcuda.
type driver struct {
	handle  uintptr
	version int // cuDriverGetVersion's

	cuInit, cuDriverGetVersion, cuGetErrorName, cuGetErrorString                uintptr
	cuDeviceGetCount, cuDeviceGet, cuDeviceGetName, cuDeviceGetAttribute        uintptr
	cuDeviceTotalMem, cuDevicePrimaryCtxRetain, cuDevicePrimaryCtxRelease       uintptr
	cuCtxSetCurrent, cuCtxGetCurrent, cuCtxSynchronize                          uintptr
	cuStreamCreate, cuStreamDestroy, cuStreamSynchronize, cuStreamQuery         uintptr
	cuStreamWaitEvent                                                           uintptr
	cuEventCreate, cuEventRecord, cuEventSynchronize, cuEventQuery              uintptr
	cuEventDestroy, cuEventElapsedTime                                          uintptr
	cuMemAlloc, cuMemFree, cuMemHostRegister, cuMemHostUnregister, cuMemGetInfo uintptr
	cuMemcpyHtoD, cuMemcpyDtoH, cuMemcpyHtoDAsync, cuMemcpyDtoHAsync            uintptr
	cuMemcpyDtoDAsync, cuMemsetD8Async                                          uintptr
	cuModuleLoadDataEx, cuModuleGetFunction, cuModuleUnload, cuLaunchKernel     uintptr
	cuFuncGetAttribute                                                          uintptr
}

// symbols lists, for each entry point, the exported names to try in order
// (newest ABI first: the _v2 names are the ones cuda.h maps the plain names
// to, with 64-bit sizes and pointers).
func (d *driver) symbols() []struct {
	dst   *uintptr
	names []string
} {
	type sym = struct {
		dst   *uintptr
		names []string
	}
	s := func(dst *uintptr, names ...string) sym { return sym{dst, names} }
	return []sym{
		s(&d.cuDeviceGetCount, "cuDeviceGetCount"),
		s(&d.cuDeviceGet, "cuDeviceGet"),
		s(&d.cuDeviceGetName, "cuDeviceGetName"),
		s(&d.cuDeviceGetAttribute, "cuDeviceGetAttribute"),
		s(&d.cuDeviceTotalMem, "cuDeviceTotalMem_v2"),
		s(&d.cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain"),
		s(&d.cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2"),
		s(&d.cuCtxSetCurrent, "cuCtxSetCurrent"),
		s(&d.cuCtxGetCurrent, "cuCtxGetCurrent"),
		s(&d.cuCtxSynchronize, "cuCtxSynchronize"),
		s(&d.cuStreamCreate, "cuStreamCreate"),
		s(&d.cuStreamDestroy, "cuStreamDestroy_v2"),
		s(&d.cuStreamSynchronize, "cuStreamSynchronize"),
		s(&d.cuStreamQuery, "cuStreamQuery"),
		s(&d.cuStreamWaitEvent, "cuStreamWaitEvent"),
		s(&d.cuEventCreate, "cuEventCreate"),
		s(&d.cuEventRecord, "cuEventRecord"),
		s(&d.cuEventSynchronize, "cuEventSynchronize"),
		s(&d.cuEventQuery, "cuEventQuery"),
		s(&d.cuEventDestroy, "cuEventDestroy_v2"),
		s(&d.cuEventElapsedTime, "cuEventElapsedTime_v2", "cuEventElapsedTime"),
		s(&d.cuMemAlloc, "cuMemAlloc_v2"),
		s(&d.cuMemFree, "cuMemFree_v2"),
		s(&d.cuMemHostRegister, "cuMemHostRegister_v2"),
		s(&d.cuMemHostUnregister, "cuMemHostUnregister"),
		s(&d.cuMemGetInfo, "cuMemGetInfo_v2"),
		s(&d.cuMemcpyHtoD, "cuMemcpyHtoD_v2"),
		s(&d.cuMemcpyDtoH, "cuMemcpyDtoH_v2"),
		s(&d.cuMemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2"),
		s(&d.cuMemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2"),
		s(&d.cuMemcpyDtoDAsync, "cuMemcpyDtoDAsync_v2"),
		s(&d.cuMemsetD8Async, "cuMemsetD8Async"),
		s(&d.cuModuleLoadDataEx, "cuModuleLoadDataEx"),
		s(&d.cuModuleGetFunction, "cuModuleGetFunction"),
		s(&d.cuModuleUnload, "cuModuleUnload"),
		s(&d.cuLaunchKernel, "cuLaunchKernel"),
		s(&d.cuFuncGetAttribute, "cuFuncGetAttribute"),
	}
}

var (
	findOnce sync.Once
	found    *driver
	findErr  error

	loadOnce sync.Once
	loaded   *driver
	loadErr  error
)

// Find opens libcuda.so.1 and checks that it is new enough, without
// initialising it: in a fraction of the time Load's cuInit takes
// (bench/results/2026-12-07-code-comments.md#cudastagecu) it tells whether a GPU may be usable at all
// (the error wraps ErrNoDriver or ErrDriverTooOld).
func Find() error {
	_, err := find()
	return err
}

func find() (*driver, error) {
	findOnce.Do(func() { found, findErr = openLib(LibraryName) })
	return found, findErr
}

// Load opens libcuda.so.1 and initialises the driver (cuInit(0)). Only the
// first call does the work; later calls return the same result. Every other
// function of the package calls it, so calling it first is only needed to
// learn early whether a GPU can be used. The error wraps ErrNoDriver,
// ErrDriverTooOld or ErrNoDevice, and says why.
func Load() error {
	_, err := get()
	return err
}

func get() (*driver, error) {
	loadOnce.Do(func() {
		if loaded, loadErr = find(); loadErr == nil {
			loadErr = loaded.init()
		}
		if loadErr != nil {
			loaded = nil
		}
	})
	return loaded, loadErr
}

// openLib loads the driver library at path and finds its entry points,
// checking its version first. It takes a path so that tests can open a fake
// library.
func openLib(path string) (*driver, error) {
	h, err := purego.Dlopen(path, purego.RTLD_NOW|purego.RTLD_GLOBAL)
	if err != nil {
		return nil, fmt.Errorf("%w (is the NVIDIA driver installed?): %v", ErrNoDriver, err)
	}
	d := &driver{handle: h}
	for _, s := range []struct {
		dst  *uintptr
		name string
	}{
		{&d.cuInit, "cuInit"},
		{&d.cuDriverGetVersion, "cuDriverGetVersion"},
		{&d.cuGetErrorName, "cuGetErrorName"},
		{&d.cuGetErrorString, "cuGetErrorString"},
	} {
		if *s.dst, err = purego.Dlsym(h, s.name); err != nil {
			return nil, fmt.Errorf("%w: %s lacks %s", ErrDriverTooOld, path, s.name)
		}
	}
	// The version is checked before cuInit: an old driver may not even
	// initialise with a device it does not know.
	v, err := d.driverVersion()
	if err != nil {
		return nil, err
	}
	if v < MinDriverVersion {
		return nil, fmt.Errorf("%w: driver supports CUDA %s, imgpipe needs CUDA %s or newer",
			ErrDriverTooOld, VersionString(v), VersionString(MinDriverVersion))
	}
	for _, s := range d.symbols() {
		for _, name := range s.names {
			if p, err := purego.Dlsym(h, name); err == nil {
				*s.dst = p
				break
			}
		}
		if *s.dst == 0 {
			return nil, fmt.Errorf("%w: driver (CUDA %s) lacks %s", ErrDriverTooOld, VersionString(v), s.names[0])
		}
	}
	d.version = v
	return d, nil
}

// init initialises the driver (cuInit) and checks that it sees a device.
func (d *driver) init() error {
	if err := d.call("cuInit", d.cuInit, 0); err != nil {
		if HasCode(err, ErrorNoDevice) {
			return fmt.Errorf("%w: %w", ErrNoDevice, err)
		}
		return err
	}
	var n int32
	if err := d.call("cuDeviceGetCount", d.cuDeviceGetCount, uintptr(unsafe.Pointer(&n))); err != nil {
		return err
	}
	if n == 0 {
		return fmt.Errorf("%w: the driver (CUDA %s) sees 0 devices", ErrNoDevice, VersionString(d.version))
	}
	return nil
}

// call invokes a driver entry point and turns its CUresult into an error
// naming the call. Callers pass pointers as uintptr(unsafe.Pointer(&x)) in
// the argument list itself: uintptrescapes keeps those objects alive (and on
// the heap, so they cannot move) until the call returns.
//
//go:uintptrescapes
func (d *driver) call(name string, fn uintptr, args ...uintptr) error {
	r, _, _ := purego.SyscallN(fn, args...)
	if code := int(int32(uint32(r))); code != Success {
		return newError(d, name, code)
	}
	return nil
}

// callCode is call without the error construction, for the calls where a
// non-zero code is an answer rather than a failure (cuEventQuery).
//
//go:uintptrescapes
func (d *driver) callCode(fn uintptr, args ...uintptr) int {
	r, _, _ := purego.SyscallN(fn, args...)
	return int(int32(uint32(r)))
}

func (d *driver) driverVersion() (int, error) {
	var v int32
	if err := d.call("cuDriverGetVersion", d.cuDriverGetVersion, uintptr(unsafe.Pointer(&v))); err != nil {
		return 0, err
	}
	return int(v), nil
}

func (d *driver) errorName(code int) string {
	var p *byte
	if d.callCode(d.cuGetErrorName, uintptr(code), uintptr(unsafe.Pointer(&p))) != Success {
		return ""
	}
	return goString(p)
}

func (d *driver) errorString(code int) string {
	var p *byte
	if d.callCode(d.cuGetErrorString, uintptr(code), uintptr(unsafe.Pointer(&p))) != Success {
		return ""
	}
	return goString(p)
}

// goString copies a NUL-terminated C string owned by the driver.
func goString(p *byte) string {
	if p == nil {
		return ""
	}
	n := 0
	for *(*byte)(unsafe.Add(unsafe.Pointer(p), n)) != 0 {
		n++
		if n > 1<<16 { // a driver string is short; stop on garbage
			break
		}
	}
	return string(unsafe.Slice(p, n))
}

// cString returns s as a NUL-terminated byte slice for the driver.
func cString(s string) []byte {
	b := make([]byte, len(s)+1)
	copy(b, s)
	return b
}

// DriverVersion returns the CUDA version the driver supports, as
// 1000*major + 10*minor (13000 is CUDA 13.0).
func DriverVersion() (int, error) {
	d, err := get()
	if err != nil {
		return 0, err
	}
	return d.driverVersion()
}

// VersionString formats a driver version number as "13.0".
func VersionString(v int) string {
	return fmt.Sprintf("%d.%d", v/1000, v%1000/10)
}

// errNilHandle is returned for a zero handle where the driver could crash
// rather than fail.
var errNilHandle = errors.New("nil CUDA handle")
