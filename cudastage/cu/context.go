package cu

import "unsafe"

// Context is a CUDA context handle (CUcontext).
type Context uintptr

// PrimaryCtxRetain retains the device's primary context (creating it on first
// use) and returns it. It does not make it current: see Context.SetCurrent.
// Each successful call must be balanced by PrimaryCtxRelease.
func (dv Device) PrimaryCtxRetain() (Context, error) {
	d, err := get()
	if err != nil {
		return 0, err
	}
	var c Context
	if err := d.call("cuDevicePrimaryCtxRetain", d.cuDevicePrimaryCtxRetain, uintptr(unsafe.Pointer(&c)), uintptr(dv)); err != nil {
		return 0, err
	}
	return c, nil
}

// PrimaryCtxRelease releases one reference taken by PrimaryCtxRetain. The
// context is destroyed when the last reference goes.
func (dv Device) PrimaryCtxRelease() error {
	d, err := get()
	if err != nil {
		return err
	}
	return d.call("cuDevicePrimaryCtxRelease", d.cuDevicePrimaryCtxRelease, uintptr(dv))
}

// SetCurrent binds the context to the calling OS thread. The goroutine must
// hold runtime.LockOSThread for as long as it relies on it (see the package
// documentation).
func (c Context) SetCurrent() error {
	d, err := get()
	if err != nil {
		return err
	}
	return d.call("cuCtxSetCurrent", d.cuCtxSetCurrent, uintptr(c))
}

// CurrentContext returns the context bound to the calling OS thread, or 0.
func CurrentContext() (Context, error) {
	d, err := get()
	if err != nil {
		return 0, err
	}
	var c Context
	if err := d.call("cuCtxGetCurrent", d.cuCtxGetCurrent, uintptr(unsafe.Pointer(&c))); err != nil {
		return 0, err
	}
	return c, nil
}

// CtxSynchronize waits until all work in the current context is done and
// returns the first asynchronous error, if any.
func CtxSynchronize() error {
	d, err := get()
	if err != nil {
		return err
	}
	return d.call("cuCtxSynchronize", d.cuCtxSynchronize)
}
