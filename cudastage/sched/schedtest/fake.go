package schedtest

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/imgpipe/imgpipe/cudastage/sched"
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
	// Opened, when set, makes the device open in the background, as the CUDA
	// device does (sched.Starter): Ready returns it, and BindThread waits for
	// it to be closed, then fails with OpenErr when that is set. nil: the
	// device is open at once.
	Opened  <-chan struct{}
	OpenErr error
	// PageableRate, when positive, lets copies use memory that HostAlloc
	// did not return (sched.Config.Pageable): they then run synchronously, after
	// the stream's earlier work, at this many bytes per second. When 0 such
	// copies are refused.
	PageableRate float64

	// The file decoder (sched.FileDecoder; see codec.go).

	// DecodeFail, when set, fails the files for which it returns an error, as
	// the device decoder would (besides files that do not decode).
	DecodeFail func(data []byte) error
	// BatchFailsWhole makes a batched hardware decode fail as a whole when
	// one of its files fails, as nvJPEG's batched call does: the fake then
	// decodes the batch's files one by one, so that only the bad ones fail.
	BatchFailsWhole bool
	// DecoderUnavailable, when set, is DecoderAvailable's answer: the device
	// has a file decoder that cannot load (no nvJPEG).
	DecoderUnavailable error
	// DecoderEngines is what DecoderEngines reports.
	DecoderEngines int

	// JPEGEncode, when set, is the device's JPEG encoder (sched.JPEGEncoder;
	// see codec.go): the fake's encoders call it for every image. When nil
	// the device has none (JPEGEncoderAvailable says so).
	JPEGEncode func(m *stages.Image, quality int) ([]byte, error)
	// DecodeBlock, when set, is called by every Decode on the caller's
	// goroutine before it enqueues the work, as nvJPEG's batched hardware
	// decode blocks its host thread for the whole decode: a benchmark
	// sleeps in it, a test makes decodes meet there. PeakDecodes counts the
	// Decode calls in progress at once.
	DecodeBlock func()
}

// FakeDevice is a sched.Device that runs ops on the CPU with the stages functions,
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
	cfg     FakeConfig
	name    string
	started atomic.Bool // Start was called

	mu      sync.Mutex
	cond    *sync.Cond
	err     error
	next    uintptr
	streams map[sched.Stream]*fakeStream
	events  map[sched.Event]*fakeEvent
	dev     map[sched.DevPtr][]byte
	host    map[uintptr]int // page-locked regions: start address → length
	// keep holds the host regions' Go memory so that it stays allocated
	// while only its address is in host.
	keep     map[uintptr][]byte
	devBytes int64
	calls    map[string]int
	// decoding is the number of Decode calls in progress, peakDecodes its
	// maximum.
	decoding, peakDecodes int
	// routes counts DecodeRoute calls.
	routes int

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

// Error is the call and its error: "HtoD: illegal address: ...".
func (e *FakeError) Error() string { return e.Call + ": " + e.Err.Error() }

// Unwrap returns the underlying error (an injected fault, say).
func (e *FakeError) Unwrap() error { return e.Err }

// Sticky reports that the device is unusable after the error.
func (e *FakeError) Sticky() bool { return e.Broke }

// NewFake returns a FakeDevice.
func NewFake(cfg FakeConfig) *FakeDevice {
	f := &FakeDevice{cfg: cfg, name: cfg.Name, next: 1,
		streams: map[sched.Stream]*fakeStream{}, events: map[sched.Event]*fakeEvent{},
		dev: map[sched.DevPtr][]byte{}, host: map[uintptr]int{}, keep: map[uintptr][]byte{},
		calls: map[string]int{}}
	if f.name == "" {
		f.name = "fake"
	}
	f.cond = sync.NewCond(&f.mu)
	return f
}

// Name implements sched.Device.
func (f *FakeDevice) Name() string { return f.name }

// BindThread implements sched.Device: it waits until the device opened.
func (f *FakeDevice) BindThread() error { return f.OpenErr() }

// opened is the Ready of a device that opens at once.
var opened = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

// Start implements sched.Starter: it records that the device was started
// (Started); FakeConfig.Opened still says when it is open.
func (f *FakeDevice) Start() { f.started.Store(true) }

// Started reports whether Start, OpenErr or BindThread was called.
func (f *FakeDevice) Started() bool { return f.started.Load() }

// Ready implements sched.Starter: FakeConfig.Opened, or a closed channel.
func (f *FakeDevice) Ready() <-chan struct{} {
	if f.cfg.Opened == nil {
		return opened
	}
	return f.cfg.Opened
}

// OpenErr implements sched.Starter: it starts the device and returns
// FakeConfig.OpenErr once Ready is closed.
func (f *FakeDevice) OpenErr() error {
	f.Start()
	<-f.Ready()
	return f.cfg.OpenErr
}

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
func (f *FakeDevice) enqueue(s sched.Stream, call string, cmd func() error) error {
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

// NewStream implements sched.Device.
func (f *FakeDevice) NewStream() (sched.Stream, error) {
	if err := f.syncCall("NewStream"); err != nil {
		return 0, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	s := sched.Stream(f.next)
	f.next++
	st := &fakeStream{}
	f.streams[s] = st
	f.wg.Add(1)
	go f.runStream(st)
	return s, nil
}

// DestroyStream implements sched.Device. It waits for the stream's queued work
// and its goroutine to end, so that no goroutine outlives its stream.
func (f *FakeDevice) DestroyStream(s sched.Stream) error {
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

// SyncStream implements sched.Device.
func (f *FakeDevice) SyncStream(s sched.Stream) error {
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

// NewEvent implements sched.Device.
func (f *FakeDevice) NewEvent() (sched.Event, error) {
	if err := f.syncCall("NewEvent"); err != nil {
		return 0, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	e := sched.Event(f.next)
	f.next++
	f.events[e] = &fakeEvent{}
	return e, nil
}

// DestroyEvent implements sched.Device.
func (f *FakeDevice) DestroyEvent(e sched.Event) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.events[e]; !ok {
		return &FakeError{Call: "DestroyEvent", Err: fmt.Errorf("invalid event %#x", e)}
	}
	delete(f.events, e)
	return nil
}

func (f *FakeDevice) event(call string, e sched.Event) (*fakeEvent, error) {
	ev, ok := f.events[e]
	if !ok {
		return nil, &FakeError{Call: call, Err: fmt.Errorf("invalid event %#x", e)}
	}
	return ev, nil
}

// Record implements sched.Device.
func (f *FakeDevice) Record(e sched.Event, s sched.Stream) error {
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

// StreamWait implements sched.Device.
func (f *FakeDevice) StreamWait(s sched.Stream, e sched.Event) error {
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

// WaitEvent implements sched.Device.
func (f *FakeDevice) WaitEvent(e sched.Event) error {
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

// EventDone reports whether the event's latest recording completed (a
// never-recorded event counts as done, as in CUDA).
func (f *FakeDevice) EventDone(e sched.Event) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	ev, ok := f.events[e]
	return ok && ev.doneGen >= ev.gen
}

// Elapsed implements sched.Device.
func (f *FakeDevice) Elapsed(start, end sched.Event) (time.Duration, error) {
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
