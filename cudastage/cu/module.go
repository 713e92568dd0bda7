package cu

import (
	"fmt"
	"reflect"
	"runtime"
	"strings"
	"unsafe"
)

// Module is a loaded CUDA module (CUmodule).
type Module uintptr

// Function is a kernel handle (CUfunction), valid while its module is loaded.
type Function uintptr

// jitLogSize bounds the JIT error log kept for a failed module load.
const jitLogSize = 16 << 10

// ModuleLoadData loads a module into the current context from an in-memory
// image: a fatbin, a cubin or PTX text. The image is copied first (aligned
// and NUL-terminated, as the driver wants), so it may live anywhere. When
// the driver rejects PTX, the error includes the JIT compiler's log.
func ModuleLoadData(image []byte) (Module, error) {
	d, err := get()
	if err != nil {
		return 0, err
	}
	if len(image) == 0 {
		return 0, &Error{Call: "cuModuleLoadData", Code: ErrorInvalidImage, Name: codeNames[ErrorInvalidImage], Msg: "empty image"}
	}
	// []uint64 gives 8-byte alignment; the spare word is the NUL terminator
	// that PTX text needs.
	words := make([]uint64, len(image)/8+2)
	buf := unsafe.Slice((*byte)(unsafe.Pointer(&words[0])), len(words)*8)
	copy(buf, image)

	logBuf := make([]byte, jitLogSize)
	opts := []int32{5 /* CU_JIT_ERROR_LOG_BUFFER */, 6 /* CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES */}
	vals := []uintptr{uintptr(unsafe.Pointer(&logBuf[0])), uintptr(len(logBuf))}
	var m Module
	err = d.call("cuModuleLoadData", d.cuModuleLoadDataEx,
		uintptr(unsafe.Pointer(&m)), uintptr(unsafe.Pointer(&buf[0])),
		uintptr(len(opts)), uintptr(unsafe.Pointer(&opts[0])), uintptr(unsafe.Pointer(&vals[0])))
	// vals holds logBuf's address as an integer, which the collector does
	// not see: keep logBuf alive until the driver has finished writing it.
	runtime.KeepAlive(logBuf)
	runtime.KeepAlive(words)
	if err != nil {
		if log := strings.TrimSpace(goString(&logBuf[0])); log != "" {
			if e, ok := err.(*Error); ok {
				e.Msg += ": " + log
			}
		}
		return 0, err
	}
	return m, nil
}

// Unload unloads the module; its functions become invalid.
func (m Module) Unload() error {
	d, err := get()
	if err != nil {
		return err
	}
	if m == 0 {
		return errNilHandle
	}
	return d.call("cuModuleUnload", d.cuModuleUnload, uintptr(m))
}

// Function returns the kernel with the given (unmangled, extern "C") name.
func (m Module) Function(name string) (Function, error) {
	d, err := get()
	if err != nil {
		return 0, err
	}
	if m == 0 {
		return 0, errNilHandle
	}
	cname := cString(name)
	var f Function
	if err := d.call("cuModuleGetFunction", d.cuModuleGetFunction, uintptr(unsafe.Pointer(&f)), uintptr(m), uintptr(unsafe.Pointer(&cname[0]))); err != nil {
		if e, ok := err.(*Error); ok {
			e.Msg += fmt.Sprintf(" (kernel %q)", name)
		}
		return 0, err
	}
	return f, nil
}

// FunctionAttribute selects a kernel property (CUfunction_attribute).
type FunctionAttribute int32

// Kernel attributes, with the values of cuda.h.
const (
	FuncMaxThreadsPerBlock FunctionAttribute = 0
	FuncSharedSizeBytes    FunctionAttribute = 1
	FuncConstSizeBytes     FunctionAttribute = 2
	FuncLocalSizeBytes     FunctionAttribute = 3
	FuncNumRegs            FunctionAttribute = 4
	FuncPTXVersion         FunctionAttribute = 5
	FuncBinaryVersion      FunctionAttribute = 6
)

// Attribute returns one property of the kernel, e.g. FuncMaxThreadsPerBlock
// (the largest block it can be launched with, given its register use).
func (f Function) Attribute(a FunctionAttribute) (int, error) {
	d, err := get()
	if err != nil {
		return 0, err
	}
	if f == 0 {
		return 0, errNilHandle
	}
	var v int32
	if err := d.call("cuFuncGetAttribute", d.cuFuncGetAttribute, uintptr(unsafe.Pointer(&v)), uintptr(a), uintptr(f)); err != nil {
		return 0, err
	}
	return int(v), nil
}

// LaunchKernel queues kernel f on stream s with the given grid and block
// dimensions and dynamic shared memory. args are pointers to the kernel's
// parameter values, in order, as cuLaunchKernel's kernelParams: for
// `k(uint8_t* p, int n)` pass &ptr (a DevicePtr) and &n (an int32). The
// values are captured by the call, so they may change right after it.
//
// Each arg must be a non-nil pointer to a fixed-size value without Go
// pointers: sized integers, floats, DevicePtr, or arrays and structs of them
// (laid out as the kernel expects). Go's int and uint are refused because
// their size does not match C's int.
func LaunchKernel(f Function, grid, block [3]uint32, sharedBytes uint32, s Stream, args ...any) error {
	d, err := get()
	if err != nil {
		return err
	}
	if f == 0 {
		return &Error{Call: "cuLaunchKernel", Code: ErrorInvalidHandle, Name: codeNames[ErrorInvalidHandle], Msg: "nil function"}
	}
	params := make([]unsafe.Pointer, len(args)+1) // +1: never index an empty slice
	for i, a := range args {
		p, err := paramPointer(a)
		if err != nil {
			return fmt.Errorf("cuLaunchKernel: argument %d: %w", i, err)
		}
		params[i] = p
	}
	var pp uintptr
	if len(args) > 0 {
		pp = uintptr(unsafe.Pointer(&params[0]))
	}
	err = d.call("cuLaunchKernel", d.cuLaunchKernel, uintptr(f),
		uintptr(grid[0]), uintptr(grid[1]), uintptr(grid[2]),
		uintptr(block[0]), uintptr(block[1]), uintptr(block[2]),
		uintptr(sharedBytes), uintptr(s), pp, 0)
	// The driver copies the parameter values during the call; until then
	// params (and through it each value) must stay reachable.
	runtime.KeepAlive(params)
	runtime.KeepAlive(args)
	return err
}

// paramPointer checks one kernel argument and returns the address of its
// value.
func paramPointer(a any) (unsafe.Pointer, error) {
	v := reflect.ValueOf(a)
	if v.Kind() != reflect.Pointer {
		return nil, fmt.Errorf("got %T, want a pointer to the value", a)
	}
	if v.IsNil() {
		return nil, fmt.Errorf("nil %T", a)
	}
	if err := checkParamType(v.Type().Elem()); err != nil {
		return nil, fmt.Errorf("%T: %w", a, err)
	}
	return v.UnsafePointer(), nil
}

func checkParamType(t reflect.Type) error {
	switch t.Kind() {
	case reflect.Bool, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64:
		return nil
	case reflect.Int, reflect.Uint:
		return fmt.Errorf("%s has no fixed C size: use int32/uint32 (C int) or int64/uint64", t)
	case reflect.Array:
		return checkParamType(t.Elem())
	case reflect.Struct:
		for i := 0; i < t.NumField(); i++ {
			if err := checkParamType(t.Field(i).Type); err != nil {
				return err
			}
		}
		return nil
	default:
		return fmt.Errorf("%s cannot be a kernel parameter (pointers to Go memory and variable-size values are not allowed; device addresses are DevicePtr)", t)
	}
}
