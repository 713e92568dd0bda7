package cu

import (
	"fmt"
	"unsafe"
)

// DevicePtr is a device memory address (CUdeviceptr).
type DevicePtr uint64

// MemAlloc allocates n bytes of device memory in the current context. The
// memory is not cleared. n must be positive.
func MemAlloc(n uint64) (DevicePtr, error) {
	d, err := get()
	if err != nil {
		return 0, err
	}
	if n == 0 {
		return 0, &Error{Call: "cuMemAlloc", Code: ErrorInvalidValue, Name: codeNames[ErrorInvalidValue], Msg: "zero-byte allocation"}
	}
	var p DevicePtr
	if err := d.call("cuMemAlloc", d.cuMemAlloc, uintptr(unsafe.Pointer(&p)), uintptr(n)); err != nil {
		return 0, err
	}
	return p, nil
}

// MemFree frees device memory from MemAlloc. It waits for the device to
// finish work that may use it.
func MemFree(p DevicePtr) error {
	d, err := get()
	if err != nil {
		return err
	}
	if p == 0 {
		return errNilHandle
	}
	return d.call("cuMemFree", d.cuMemFree, uintptr(p))
}

// MemGetInfo returns the free and total device memory of the current
// context's device, in bytes.
func MemGetInfo() (free, total uint64, err error) {
	d, err := get()
	if err != nil {
		return 0, 0, err
	}
	if err := d.call("cuMemGetInfo", d.cuMemGetInfo, uintptr(unsafe.Pointer(&free)), uintptr(unsafe.Pointer(&total))); err != nil {
		return 0, 0, err
	}
	return free, total, nil
}

// errNotPinned explains why an async copy was refused.
func errNotPinned(call string) error {
	return fmt.Errorf("%s: host memory is not from MemHostAlloc: async copies must not use Go-heap memory", call)
}

// MemcpyHtoDAsync queues a copy of src to device memory at dst on stream s.
// src must come from MemHostAlloc (see the package documentation) and must
// not be changed until the copy is done.
func MemcpyHtoDAsync(dst DevicePtr, src []byte, s Stream) error {
	d, err := get()
	if err != nil {
		return err
	}
	if len(src) == 0 {
		return nil
	}
	if !IsPinned(src) {
		return errNotPinned("cuMemcpyHtoDAsync")
	}
	return d.call("cuMemcpyHtoDAsync", d.cuMemcpyHtoDAsync, uintptr(dst), uintptr(unsafe.Pointer(unsafe.SliceData(src))), uintptr(len(src)), uintptr(s))
}

// MemcpyDtoHAsync queues a copy of len(dst) bytes from device memory at src
// into dst on stream s. dst must come from MemHostAlloc and must not be read
// until the copy is done (synchronise on the stream or an event).
func MemcpyDtoHAsync(dst []byte, src DevicePtr, s Stream) error {
	d, err := get()
	if err != nil {
		return err
	}
	if len(dst) == 0 {
		return nil
	}
	if !IsPinned(dst) {
		return errNotPinned("cuMemcpyDtoHAsync")
	}
	return d.call("cuMemcpyDtoHAsync", d.cuMemcpyDtoHAsync, uintptr(unsafe.Pointer(unsafe.SliceData(dst))), uintptr(src), uintptr(len(dst)), uintptr(s))
}

// MemcpyDtoDAsync queues a copy of n bytes between device buffers on stream s.
func MemcpyDtoDAsync(dst, src DevicePtr, n uint64, s Stream) error {
	d, err := get()
	if err != nil {
		return err
	}
	if n == 0 {
		return nil
	}
	return d.call("cuMemcpyDtoDAsync", d.cuMemcpyDtoDAsync, uintptr(dst), uintptr(src), uintptr(n), uintptr(s))
}

// MemcpyHtoD copies src to device memory and returns when the copy is done.
// Any slice may be used (it is only read during the call).
func MemcpyHtoD(dst DevicePtr, src []byte) error {
	d, err := get()
	if err != nil {
		return err
	}
	if len(src) == 0 {
		return nil
	}
	return d.call("cuMemcpyHtoD", d.cuMemcpyHtoD, uintptr(dst), uintptr(unsafe.Pointer(unsafe.SliceData(src))), uintptr(len(src)))
}

// MemcpyDtoH copies len(dst) bytes from device memory into dst and returns
// when the copy is done. Any slice may be used.
func MemcpyDtoH(dst []byte, src DevicePtr) error {
	d, err := get()
	if err != nil {
		return err
	}
	if len(dst) == 0 {
		return nil
	}
	return d.call("cuMemcpyDtoH", d.cuMemcpyDtoH, uintptr(unsafe.Pointer(unsafe.SliceData(dst))), uintptr(src), uintptr(len(dst)))
}

// MemsetD8Async queues setting n bytes at p to v on stream s.
func MemsetD8Async(p DevicePtr, v byte, n uint64, s Stream) error {
	d, err := get()
	if err != nil {
		return err
	}
	if n == 0 {
		return nil
	}
	return d.call("cuMemsetD8Async", d.cuMemsetD8Async, uintptr(p), uintptr(v), uintptr(n), uintptr(s))
}
