package sched

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"time"
	"unsafe"

	"github.com/imgpipe/imgpipe/stages"
)

// FakeConfig sets up a FakeDevice.
type FakeConfig struct {
	// Name is the device's name (default "fake").
	Name string
	// H2DRate and D2HRate are the copy engines' bytes per second (0:
	// instant). Copies in one direction share one engine, as on a GPU.
	H2DRate, D2HRate float64
	// CopyLatency is added to every copy, KernelLatency to every launch.
	CopyLatency, KernelLatency time.Duration
	// Fault, when set, is asked before every device call runs: async ones
	// (copies, launches, records, stream waits) when the stream reaches
	// them, the others when called. A non-nil error breaks the device, as a
	// sticky CUDA error does: every later call, wait and sync fails with it.
	Fault func(call string) error
	// MaxDeviceBytes limits device allocations (0: unlimited).
	MaxDeviceBytes int64
	// PageableRate, when positive, lets copies use memory that HostAlloc
	// did not return (Config.Pageable): they then run synchronously, after
	// the stream's earlier work, at this many bytes per second. When 0 such
	// copies are refused.
	PageableRate float64
}

// FakeDevice is a Device that runs ops on the CPU with the stages functions,
// for tests and demos without a GPU. It behaves like a GPU where the
// executor can tell: streams are asynchronous queues, each run by its own
// goroutine; copies take time and serialize per direction on a copy engine;
// launches serialize on one compute engine; events complete when their
// stream reaches them; errors are sticky. It also checks what a GPU would not
// forgive: copies from memory that HostAlloc did not return, out-of-range
// offsets (an "illegal address" that breaks the device), freed buffers, and
// launches whose table was not uploaded (its kernels read offsets and shapes
// from the device copy of the launch table, as real kernels do).
type FakeDevice struct {
	cfg  FakeConfig
	name string

	mu      sync.Mutex
	cond    *sync.Cond
	err     error
	next    uintptr
	streams map[Stream]*fakeStream
	events  map[Event]*fakeEvent
	dev     map[DevPtr][]byte
	host    map[uintptr]int // page-locked regions: start address → length
	// keep holds the host regions' Go memory so that it stays allocated
	// while only its address is in host.
	keep     map[uintptr][]byte
	devBytes int64
	calls    map[string]int

	h2d, d2h, compute sync.Mutex
	wg                sync.WaitGroup
}

type fakeStream struct {
	q         []func() error
	enq, done uint64
	closed    bool
}

type fakeEvent struct {
	gen, doneGen uint64
	t            time.Time
}

// FakeError is the FakeDevice's error. Errors of work that ran on a stream
// (and injected faults) break the device, like sticky CUDA errors; errors
// found when a call is made (a bad handle, a range, unpinned memory) do not.
type FakeError struct {
	Call  string
	Err   error
	Broke bool // the error broke the device (it came from work that ran)
}

func (e *FakeError) Error() string { return e.Call + ": " + e.Err.Error() }
func (e *FakeError) Unwrap() error { return e.Err }

// Sticky reports that the device is unusable after the error.
func (e *FakeError) Sticky() bool { return e.Broke }

// NewFake returns a FakeDevice.
func NewFake(cfg FakeConfig) *FakeDevice {
	f := &FakeDevice{cfg: cfg, name: cfg.Name, next: 1,
		streams: map[Stream]*fakeStream{}, events: map[Event]*fakeEvent{},
		dev: map[DevPtr][]byte{}, host: map[uintptr]int{}, keep: map[uintptr][]byte{},
		calls: map[string]int{}}
	if f.name == "" {
		f.name = "fake"
	}
	f.cond = sync.NewCond(&f.mu)
	return f
}

// Name implements Device.
func (f *FakeDevice) Name() string { return f.name }

// BindThread implements Device.
func (f *FakeDevice) BindThread() error { return nil }

// Err is the error that broke the device, or nil.
func (f *FakeDevice) Err() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.err
}

// FakeLive counts what a FakeDevice holds: a leak check after Close.
type FakeLive struct {
	Streams, Events, DevBufs, HostBufs int
	DevBytes                           int64
}

// Live reports the streams, events and buffers not yet destroyed or freed.
func (f *FakeDevice) Live() FakeLive {
	f.mu.Lock()
	defer f.mu.Unlock()
	return FakeLive{Streams: len(f.streams), Events: len(f.events), DevBufs: len(f.dev), HostBufs: len(f.host), DevBytes: f.devBytes}
}

// Calls is how many times each async call ran ("HtoD", "Run grayscale", ...).
func (f *FakeDevice) Calls() map[string]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	m := make(map[string]int, len(f.calls))
	for k, v := range f.calls {
		m[k] = v
	}
	return m
}

// syncCall is the common start of a synchronous call: the sticky error, then
// the fault hook. f.mu must not be held.
func (f *FakeDevice) syncCall(call string) error {
	f.mu.Lock()
	err := f.err
	f.mu.Unlock()
	if err != nil {
		return err
	}
	if f.cfg.Fault != nil {
		if err := f.cfg.Fault(call); err != nil {
			return f.breakWith(call, err)
		}
	}
	return nil
}

// breakWith makes err the device's sticky error (unless it already has one)
// and returns the sticky error.
func (f *FakeDevice) breakWith(call string, err error) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err == nil {
		fe, ok := err.(*FakeError)
		if !ok {
			fe = &FakeError{Call: call, Err: err}
		}
		fe.Broke = true
		f.err = fe
		f.cond.Broadcast()
	}
	return f.err
}

// enqueue adds cmd to stream s; it runs when the stream reaches it, unless
// the device broke meanwhile.
func (f *FakeDevice) enqueue(s Stream, call string, cmd func() error) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return f.err
	}
	st, ok := f.streams[s]
	if !ok || st.closed {
		return &FakeError{Call: call, Err: fmt.Errorf("invalid stream %#x", s)}
	}
	st.q = append(st.q, func() error {
		if f.cfg.Fault != nil {
			if err := f.cfg.Fault(call); err != nil {
				return &FakeError{Call: call, Err: err, Broke: true}
			}
		}
		f.mu.Lock()
		f.calls[call]++
		f.mu.Unlock()
		if err := cmd(); err != nil {
			return &FakeError{Call: call, Err: err, Broke: true}
		}
		return nil
	})
	st.enq++
	f.cond.Broadcast()
	return nil
}

func (f *FakeDevice) runStream(st *fakeStream) {
	defer f.wg.Done()
	f.mu.Lock()
	for {
		for len(st.q) == 0 && !st.closed {
			f.cond.Wait()
		}
		if len(st.q) == 0 {
			f.mu.Unlock()
			return
		}
		cmd := st.q[0]
		st.q[0] = nil
		st.q = st.q[1:]
		broken := f.err != nil
		f.mu.Unlock()
		var err error
		if !broken {
			err = cmd()
		}
		f.mu.Lock()
		if err != nil && f.err == nil {
			f.err = err
		}
		st.done++
		f.cond.Broadcast()
	}
}

// NewStream implements Device.
func (f *FakeDevice) NewStream() (Stream, error) {
	if err := f.syncCall("NewStream"); err != nil {
		return 0, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	s := Stream(f.next)
	f.next++
	st := &fakeStream{}
	f.streams[s] = st
	f.wg.Add(1)
	go f.runStream(st)
	return s, nil
}

// DestroyStream implements Device. It waits for the stream's queued work
// and its goroutine to end, so that no goroutine outlives its stream.
func (f *FakeDevice) DestroyStream(s Stream) error {
	f.mu.Lock()
	st, ok := f.streams[s]
	if !ok {
		f.mu.Unlock()
		return &FakeError{Call: "DestroyStream", Err: fmt.Errorf("invalid stream %#x", s)}
	}
	delete(f.streams, s)
	st.closed = true
	f.cond.Broadcast()
	for st.done < st.enq {
		f.cond.Wait()
	}
	f.mu.Unlock()
	return nil
}

// SyncStream implements Device.
func (f *FakeDevice) SyncStream(s Stream) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	st, ok := f.streams[s]
	if !ok {
		return &FakeError{Call: "SyncStream", Err: fmt.Errorf("invalid stream %#x", s)}
	}
	target := st.enq
	for st.done < target && f.err == nil {
		f.cond.Wait()
	}
	return f.err
}

// Close ends every stream goroutine still running (streams not destroyed).
func (f *FakeDevice) Close() {
	f.mu.Lock()
	for s, st := range f.streams {
		st.closed = true
		delete(f.streams, s)
	}
	f.cond.Broadcast()
	f.mu.Unlock()
	f.wg.Wait()
}

// NewEvent implements Device.
func (f *FakeDevice) NewEvent() (Event, error) {
	if err := f.syncCall("NewEvent"); err != nil {
		return 0, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	e := Event(f.next)
	f.next++
	f.events[e] = &fakeEvent{}
	return e, nil
}

// DestroyEvent implements Device.
func (f *FakeDevice) DestroyEvent(e Event) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.events[e]; !ok {
		return &FakeError{Call: "DestroyEvent", Err: fmt.Errorf("invalid event %#x", e)}
	}
	delete(f.events, e)
	return nil
}

func (f *FakeDevice) event(call string, e Event) (*fakeEvent, error) {
	ev, ok := f.events[e]
	if !ok {
		return nil, &FakeError{Call: call, Err: fmt.Errorf("invalid event %#x", e)}
	}
	return ev, nil
}

// Record implements Device.
func (f *FakeDevice) Record(e Event, s Stream) error {
	f.mu.Lock()
	ev, err := f.event("Record", e)
	if err != nil {
		f.mu.Unlock()
		return err
	}
	ev.gen++
	gen := ev.gen
	f.mu.Unlock()
	return f.enqueue(s, "Record", func() error {
		f.mu.Lock()
		defer f.mu.Unlock()
		if gen > ev.doneGen {
			ev.doneGen, ev.t = gen, time.Now()
		}
		f.cond.Broadcast()
		return nil
	})
}

// StreamWait implements Device.
func (f *FakeDevice) StreamWait(s Stream, e Event) error {
	f.mu.Lock()
	ev, err := f.event("StreamWait", e)
	if err != nil {
		f.mu.Unlock()
		return err
	}
	gen := ev.gen
	f.mu.Unlock()
	return f.enqueue(s, "StreamWait", func() error {
		f.mu.Lock()
		defer f.mu.Unlock()
		for ev.doneGen < gen && f.err == nil {
			f.cond.Wait()
		}
		return nil
	})
}

// WaitEvent implements Device.
func (f *FakeDevice) WaitEvent(e Event) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	ev, err := f.event("WaitEvent", e)
	if err != nil {
		return err
	}
	gen := ev.gen
	for ev.doneGen < gen && f.err == nil {
		f.cond.Wait()
	}
	return f.err
}

// eventDone reports whether the event's latest recording completed (a
// never-recorded event counts as done, as in CUDA).
func (f *FakeDevice) eventDone(e Event) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	ev, ok := f.events[e]
	return ok && ev.doneGen >= ev.gen
}

// Elapsed implements Device.
func (f *FakeDevice) Elapsed(start, end Event) (time.Duration, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return 0, f.err
	}
	a, err := f.event("Elapsed", start)
	if err != nil {
		return 0, err
	}
	b, err := f.event("Elapsed", end)
	if err != nil {
		return 0, err
	}
	if a.doneGen == 0 || a.doneGen < a.gen || b.doneGen == 0 || b.doneGen < b.gen {
		return 0, &FakeError{Call: "Elapsed", Err: errors.New("event not completed")}
	}
	return b.t.Sub(a.t), nil
}

// HostAlloc implements Device with Go memory it remembers as page-locked.
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

// HostFree implements Device.
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

// DevAlloc implements Device.
func (f *FakeDevice) DevAlloc(n int) (DevPtr, error) {
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
	p := DevPtr(f.next)
	f.next++
	b := make([]byte, n)
	for i := range b {
		b[i] = 0xA5 // poison: an unwritten output never looks right
	}
	f.dev[p] = b
	f.devBytes += int64(n)
	return p, nil
}

// DevFree implements Device.
func (f *FakeDevice) DevFree(p DevPtr) error {
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
func (f *FakeDevice) devRange(p DevPtr, off, n int) ([]byte, error) {
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

// HtoD implements Device.
func (f *FakeDevice) HtoD(s Stream, dst DevPtr, off int, src []byte) error {
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

// DtoH implements Device.
func (f *FakeDevice) DtoH(s Stream, dst []byte, src DevPtr, off int) error {
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
func (f *FakeDevice) syncCopy(s Stream, call string, do func([]byte), p DevPtr, off, n int) error {
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

// fakeTableEntry is the fake's launch table entry: four little-endian
// uint64s per image.
const fakeTableEntry = 32

// TableBytes implements Device.
func (f *FakeDevice) TableBytes(op Op, n int) int { return fakeTableEntry * n }

// CheckOp implements Device: the fake runs any complete op, with its CPU
// function.
func (f *FakeDevice) CheckOp(op Op) error { return nil }

// ScratchBytes implements Device: every op that makes an image asks for a
// uint16 per sample, as the CUDA separable filters do, so that the
// executor's scratch plumbing is exercised.
func (f *FakeDevice) ScratchBytes(op Op, srcCap, n int) int {
	if op.makesImage() {
		return 2 * srcCap
	}
	return 0
}

// EncodeTable implements Device.
func (f *FakeDevice) EncodeTable(call *OpCall, dst []byte) error {
	if len(dst) < fakeTableEntry*len(call.Images) {
		return &FakeError{Call: "EncodeTable", Err: fmt.Errorf("table of %d bytes for %d images", len(dst), len(call.Images))}
	}
	for i, im := range call.Images {
		b := dst[i*fakeTableEntry:]
		out := uint64(im.DstOff)
		if call.Op.Hist {
			out = uint64(im.HistOff)
		}
		binary.LittleEndian.PutUint64(b[0:], uint64(im.SrcOff))
		binary.LittleEndian.PutUint64(b[8:], out)
		binary.LittleEndian.PutUint64(b[16:], uint64(im.In.W)<<32|uint64(im.In.H))
		binary.LittleEndian.PutUint64(b[24:], uint64(im.In.C))
	}
	return nil
}

// Run implements Device. The launch reads each image's offsets and shape
// from the uploaded table, like a real kernel; call.Images gives only the
// image count.
func (f *FakeDevice) Run(s Stream, call *OpCall) error {
	c := *call // the caller may reuse call once Run returns
	n := len(call.Images)
	name := "Run " + c.Op.Name
	if err := c.Op.check(); err != nil {
		return &FakeError{Call: name, Err: err}
	}
	f.mu.Lock()
	_, terr := f.devRange(c.Table, c.TableOff, fakeTableEntry*n)
	f.mu.Unlock()
	if terr != nil {
		return &FakeError{Call: name, Err: fmt.Errorf("launch table: %w", terr)}
	}
	return f.enqueue(s, name, func() error {
		f.compute.Lock()
		defer f.compute.Unlock()
		if f.cfg.KernelLatency > 0 {
			time.Sleep(f.cfg.KernelLatency)
		}
		jobs, err := f.resolve(&c, n)
		if err != nil {
			return err
		}
		// The views stay valid without f.mu: freeing a buffer that a queued
		// launch uses would be the caller's bug, and the race detector's.
		for _, j := range jobs {
			j()
		}
		return nil
	})
}

// resolve reads the launch table and returns one closure per image doing the
// op on views into device memory, or an illegal-address error.
func (f *FakeDevice) resolve(c *OpCall, n int) ([]func(), error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if c.Op.makesImage() {
		if _, err := f.devRange(c.Scratch, 0, 1); err != nil {
			return nil, fmt.Errorf("%s scratch: %w", c.Op, err)
		}
	}
	tab, err := f.devRange(c.Table, c.TableOff, fakeTableEntry*n)
	if err != nil {
		return nil, err
	}
	jobs := make([]func(), 0, n)
	for i := range n {
		b := tab[i*fakeTableEntry:]
		srcOff := int(binary.LittleEndian.Uint64(b[0:]))
		outOff := int(binary.LittleEndian.Uint64(b[8:]))
		wh := binary.LittleEndian.Uint64(b[16:])
		in := Shape{W: int(wh >> 32), H: int(uint32(wh)), C: int(binary.LittleEndian.Uint64(b[24:]))}
		if err := checkShape(in); err != nil {
			return nil, fmt.Errorf("image %d: %w", i, err)
		}
		j, err := f.imageJob(c, in, srcOff, outOff)
		if err != nil {
			return nil, fmt.Errorf("image %d: %w", i, err)
		}
		jobs = append(jobs, j)
	}
	return jobs, nil
}

// imageJob returns the op on one image with its CPU function. f.mu held.
func (f *FakeDevice) imageJob(c *OpCall, in Shape, srcOff, outOff int) (func(), error) {
	sp, err := f.devRange(c.Src, srcOff, in.Bytes())
	if err != nil {
		return nil, err
	}
	src := &stages.Image{W: in.W, H: in.H, C: in.C, Stride: in.W * in.C, Pix: sp}
	op := c.Op
	if op.Hist {
		hp, err := f.devRange(c.Hist, outOff, HistBytes)
		if err != nil {
			return nil, err
		}
		return func() {
			var h [256]uint64
			op.CPU(nil, src, &h)
			for k, v := range h {
				binary.LittleEndian.PutUint64(hp[8*k:], v)
			}
		}, nil
	}
	out := op.OutShape(in)
	dp, err := f.devRange(c.Dst, outOff, out.Bytes())
	if err != nil {
		return nil, err
	}
	if c.Src == c.Dst && srcOff < outOff+out.Bytes() && outOff < srcOff+in.Bytes() {
		return nil, errors.New("source and destination overlap")
	}
	dst := &stages.Image{W: out.W, H: out.H, C: out.C, Stride: out.W * out.C, Pix: dp}
	return func() { op.CPU(dst, src, nil) }, nil
}
