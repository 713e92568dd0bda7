package schedtest

import (
	"errors"
	"fmt"
	"time"
	"unsafe"

	"github.com/imgpipe/imgpipe/cudastage/sched"
)

// HostAlloc implements sched.Device with Go memory it remembers as page-locked.
func (f *FakeDevice) HostAlloc(n int) ([]byte, error) {
	if err := f.syncCall("HostAlloc"); err != nil {
		return nil, err
	}
	if n <= 0 {
		return nil, &FakeError{Call: "HostAlloc", Err: fmt.Errorf("invalid size %d", n)}
	}
	b := make([]byte, n)
	p := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	f.mu.Lock()
	f.host[p] = n
	f.keep[p] = b
	f.mu.Unlock()
	return b, nil
}

// HostFree implements sched.Device.
func (f *FakeDevice) HostFree(b []byte) error {
	p := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.host[p]; !ok {
		return &FakeError{Call: "HostFree", Err: errors.New("not a HostAlloc region")}
	}
	delete(f.host, p)
	delete(f.keep, p)
	return nil
}

// pinned reports whether b lies inside one HostAlloc region. f.mu held.
func (f *FakeDevice) pinned(b []byte) bool {
	if len(b) == 0 {
		return true
	}
	p := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	for start, n := range f.host {
		if p >= start && p+uintptr(len(b)) <= start+uintptr(n) {
			return true
		}
	}
	return false
}

// DevAlloc implements sched.Device.
func (f *FakeDevice) DevAlloc(n int) (sched.DevPtr, error) {
	if err := f.syncCall("DevAlloc"); err != nil {
		return 0, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if n <= 0 {
		return 0, &FakeError{Call: "DevAlloc", Err: fmt.Errorf("invalid size %d", n)}
	}
	if f.cfg.MaxDeviceBytes > 0 && f.devBytes+int64(n) > f.cfg.MaxDeviceBytes {
		// Out of memory is not sticky on a GPU, but the executor treats every
		// error as fatal anyway; report it without breaking the device.
		return 0, fmt.Errorf("DevAlloc: out of memory: %d bytes in use, %d asked, %d total", f.devBytes, n, f.cfg.MaxDeviceBytes)
	}
	p := sched.DevPtr(f.next)
	f.next++
	b := make([]byte, n)
	for i := range b {
		b[i] = 0xA5 // poison: an unwritten output never looks right
	}
	f.dev[p] = b
	f.devBytes += int64(n)
	return p, nil
}

// DevFree implements sched.Device.
func (f *FakeDevice) DevFree(p sched.DevPtr) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	b, ok := f.dev[p]
	if !ok {
		return &FakeError{Call: "DevFree", Err: fmt.Errorf("invalid device pointer %#x", p)}
	}
	f.devBytes -= int64(len(b))
	delete(f.dev, p)
	return nil
}

// devRange returns p's bytes [off, off+n), or an illegal-address error.
// f.mu held.
func (f *FakeDevice) devRange(p sched.DevPtr, off, n int) ([]byte, error) {
	b, ok := f.dev[p]
	if !ok {
		return nil, fmt.Errorf("illegal address: device pointer %#x is not allocated", p)
	}
	if off < 0 || n < 0 || off+n > len(b) {
		return nil, fmt.Errorf("illegal address: [%d, %d) outside the %d bytes of %#x", off, off+n, len(b), p)
	}
	return b[off : off+n], nil
}

func (f *FakeDevice) sleepCopy(n int, rate float64) {
	d := f.cfg.CopyLatency
	if rate > 0 {
		d += time.Duration(float64(n) / rate * float64(time.Second))
	}
	if d > 0 {
		time.Sleep(d)
	}
}

// HtoD implements sched.Device.
func (f *FakeDevice) HtoD(s sched.Stream, dst sched.DevPtr, off int, src []byte) error {
	f.mu.Lock()
	_, err := f.devRange(dst, off, len(src))
	ok := f.pinned(src)
	f.mu.Unlock()
	if err != nil {
		return &FakeError{Call: "HtoD", Err: err}
	}
	if !ok {
		if f.cfg.PageableRate <= 0 {
			return &FakeError{Call: "HtoD", Err: errors.New("source is not page-locked (HostAlloc) memory")}
		}
		return f.syncCopy(s, "HtoD", func(b []byte) { copy(b, src) }, dst, off, len(src))
	}
	return f.enqueue(s, "HtoD", func() error {
		f.h2d.Lock()
		defer f.h2d.Unlock()
		f.sleepCopy(len(src), f.cfg.H2DRate)
		f.mu.Lock()
		defer f.mu.Unlock()
		b, err := f.devRange(dst, off, len(src))
		if err != nil {
			return err
		}
		copy(b, src)
		return nil
	})
}

// DtoH implements sched.Device.
func (f *FakeDevice) DtoH(s sched.Stream, dst []byte, src sched.DevPtr, off int) error {
	f.mu.Lock()
	_, err := f.devRange(src, off, len(dst))
	ok := f.pinned(dst)
	f.mu.Unlock()
	if err != nil {
		return &FakeError{Call: "DtoH", Err: err}
	}
	if !ok {
		if f.cfg.PageableRate <= 0 {
			return &FakeError{Call: "DtoH", Err: errors.New("destination is not page-locked (HostAlloc) memory")}
		}
		return f.syncCopy(s, "DtoH", func(b []byte) { copy(dst, b) }, src, off, len(dst))
	}
	return f.enqueue(s, "DtoH", func() error {
		f.d2h.Lock()
		defer f.d2h.Unlock()
		f.sleepCopy(len(dst), f.cfg.D2HRate)
		f.mu.Lock()
		defer f.mu.Unlock()
		b, err := f.devRange(src, off, len(dst))
		if err != nil {
			return err
		}
		copy(dst, b)
		return nil
	})
}

// syncCopy is a pageable copy: it waits for the stream's earlier work, then
// copies on the caller's goroutine at PageableRate.
func (f *FakeDevice) syncCopy(s sched.Stream, call string, do func([]byte), p sched.DevPtr, off, n int) error {
	if err := f.SyncStream(s); err != nil {
		return err
	}
	if f.cfg.Fault != nil {
		if err := f.cfg.Fault(call); err != nil {
			return f.breakWith(call, err)
		}
	}
	f.sleepCopy(n, f.cfg.PageableRate)
	f.mu.Lock()
	defer f.mu.Unlock()
	b, err := f.devRange(p, off, n)
	if err != nil {
		return &FakeError{Call: call, Err: err}
	}
	f.calls[call+" pageable"]++
	do(b)
	return nil
}
