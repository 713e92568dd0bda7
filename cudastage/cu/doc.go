// Package cu is a small binding of the CUDA driver API, loaded at run time.
//
// libcuda.so.1 is opened with purego on first use, so the package (and every
// program that imports it) builds with CGO_ENABLED=0 and runs on machines
// without CUDA: there, [Load] and every call return an error wrapping
// [ErrNoDriver], [ErrNoDevice] or [ErrDriverTooOld], which says why no GPU can
// be used.
//
// # Errors
//
// Every call returns a Go error. Driver failures are *[Error] values that name
// the call and the CUDA error, for example
//
//	cuMemAlloc: CUDA_ERROR_OUT_OF_MEMORY: out of memory
//
// [Error.Sticky] reports errors after which the context is unusable (illegal
// address, launch failure, ...): every later call on that context fails too,
// so the caller must stop using the device (the CLI exits with code 3) rather
// than retry. Asynchronous failures surface at the next synchronising call
// (Stream.Synchronize, Event.Synchronize, CtxSynchronize, a synchronous copy).
//
// # Threading
//
// The driver keeps the current context per OS thread, while Go moves
// goroutines between OS threads at any time. A goroutine that issues driver
// calls which need a context (almost all of them: allocation, copies, streams,
// events, modules, launches) must therefore call runtime.LockOSThread and then
// [Context.SetCurrent] before the sequence, and keep the thread locked until
// the sequence is over. Package cudastage wraps this in GPU.Do. Handles
// (streams, events, device pointers, functions) belong to a context, not to a
// thread, and may be used from any thread that has that context current. The
// driver itself is thread-safe, so several locked goroutines may issue calls
// at once.
//
// # Host memory
//
// Asynchronous copies read and write host memory after the call returned, so
// they must never be given Go-heap memory: the garbage collector may free or
// reuse it (and goroutine stacks move). [MemcpyHtoDAsync] and [MemcpyDtoHAsync]
// therefore accept only memory obtained from [MemHostAlloc] (page-locked memory
// outside the Go heap) and return an error for anything else. The synchronous
// copies [MemcpyHtoD] and [MemcpyDtoH] accept any slice.
package cu
