package cu

import "unsafe"

// Stream is a CUDA stream handle (CUstream). The zero Stream is the legacy
// default stream, which synchronises with every blocking stream.
type Stream uintptr

// StreamCreate creates a stream in the current context. A non-blocking
// stream does not synchronise with the legacy default stream, which is what
// concurrent pipelines want.
func StreamCreate(nonBlocking bool) (Stream, error) {
	d, err := get()
	if err != nil {
		return 0, err
	}
	flags := uintptr(0)
	if nonBlocking {
		flags = 1 // CU_STREAM_NON_BLOCKING
	}
	var s Stream
	if err := d.call("cuStreamCreate", d.cuStreamCreate, uintptr(unsafe.Pointer(&s)), flags); err != nil {
		return 0, err
	}
	return s, nil
}

// Destroy destroys the stream. Work already queued still completes.
func (s Stream) Destroy() error {
	d, err := get()
	if err != nil {
		return err
	}
	if s == 0 {
		return &Error{Call: "cuStreamDestroy", Code: ErrorInvalidHandle, Name: codeNames[ErrorInvalidHandle], Msg: "the default stream cannot be destroyed"}
	}
	return d.call("cuStreamDestroy", d.cuStreamDestroy, uintptr(s))
}

// Synchronize waits until all work queued on the stream is done.
func (s Stream) Synchronize() error {
	d, err := get()
	if err != nil {
		return err
	}
	return d.call("cuStreamSynchronize", d.cuStreamSynchronize, uintptr(s))
}

// Query reports whether all work queued on the stream is done, without
// waiting.
func (s Stream) Query() (done bool, err error) {
	d, err := get()
	if err != nil {
		return false, err
	}
	switch code := d.callCode(d.cuStreamQuery, uintptr(s)); code {
	case Success:
		return true, nil
	case ErrorNotReady:
		return false, nil
	default:
		return false, newError(d, "cuStreamQuery", code)
	}
}

// WaitEvent makes all later work on the stream wait until the event's
// recorded work is done (on the device; the host does not wait).
func (s Stream) WaitEvent(e Event) error {
	d, err := get()
	if err != nil {
		return err
	}
	if e == 0 {
		return errNilHandle
	}
	return d.call("cuStreamWaitEvent", d.cuStreamWaitEvent, uintptr(s), uintptr(e), 0)
}

// Event is a CUDA event handle (CUevent).
type Event uintptr

// EventCreate creates an event in the current context. Timing events can be
// passed to ElapsedTime; events without timing are cheaper for pure
// synchronisation.
func EventCreate(timing bool) (Event, error) {
	d, err := get()
	if err != nil {
		return 0, err
	}
	flags := uintptr(0)
	if !timing {
		flags = 2 // CU_EVENT_DISABLE_TIMING
	}
	var e Event
	if err := d.call("cuEventCreate", d.cuEventCreate, uintptr(unsafe.Pointer(&e)), flags); err != nil {
		return 0, err
	}
	return e, nil
}

// Record captures the work queued on the stream so far; the event completes
// when that work is done.
func (e Event) Record(s Stream) error {
	d, err := get()
	if err != nil {
		return err
	}
	if e == 0 {
		return errNilHandle
	}
	return d.call("cuEventRecord", d.cuEventRecord, uintptr(e), uintptr(s))
}

// Synchronize waits until the event's work is done.
func (e Event) Synchronize() error {
	d, err := get()
	if err != nil {
		return err
	}
	if e == 0 {
		return errNilHandle
	}
	return d.call("cuEventSynchronize", d.cuEventSynchronize, uintptr(e))
}

// Query reports whether the event's work is done, without waiting.
func (e Event) Query() (done bool, err error) {
	d, err := get()
	if err != nil {
		return false, err
	}
	if e == 0 {
		return false, errNilHandle
	}
	switch code := d.callCode(d.cuEventQuery, uintptr(e)); code {
	case Success:
		return true, nil
	case ErrorNotReady:
		return false, nil
	default:
		return false, newError(d, "cuEventQuery", code)
	}
}

// Destroy destroys the event.
func (e Event) Destroy() error {
	d, err := get()
	if err != nil {
		return err
	}
	if e == 0 {
		return errNilHandle
	}
	return d.call("cuEventDestroy", d.cuEventDestroy, uintptr(e))
}

// ElapsedTime returns the device time between two completed timing events,
// in milliseconds (resolution about 0.5 µs).
func ElapsedTime(start, end Event) (float32, error) {
	d, err := get()
	if err != nil {
		return 0, err
	}
	if start == 0 || end == 0 {
		return 0, errNilHandle
	}
	var ms float32
	if err := d.call("cuEventElapsedTime", d.cuEventElapsedTime, uintptr(unsafe.Pointer(&ms)), uintptr(start), uintptr(end)); err != nil {
		return 0, err
	}
	return ms, nil
}
