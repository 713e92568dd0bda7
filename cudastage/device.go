package cudastage

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/imgpipe/imgpipe/cudastage/cu"
	"github.com/imgpipe/imgpipe/cudastage/sched"
)

// Device adapts one GPU and its batched kernels to sched.Device, so that a
// sched.Executor runs device segments on it: streams, events, page-locked
// and device memory, async copies, and each op as Kernels.Run over the
// executor's per-image placements. Make one per GPU (each GPU gets its own
// Device and executor; nothing here assumes there is only one).
//
// Every error goes through GPU.Check, so a sticky fault marks the GPU as
// unusable and later calls fail fast; the executor treats any device error
// as fatal and the CLI maps cu.IsSticky errors to exit code 3.
type Device struct {
	g     *GPU
	start sync.Once // Start's, or Close's when it comes first
	// loaded is closed once the kernels are loaded into the context, k or
	// loadErr set (Start loads them in the background).
	loaded  chan struct{}
	k       *Kernels
	loadErr error
	codec   jpegCodec  // nvJPEG, opened on first use (filedecode.go)
	turbo   turboCodec // the turbo-cuda decoder's buffers (turbodecode.go)
}

// NewDevice returns a Device on g, not opened yet: Start, or the first call
// that needs the kernels, opens g and loads them in the background. Close
// unloads them, after every executor on the Device was closed.
func NewDevice(g *GPU) *Device {
	return &Device{g: g, loaded: make(chan struct{})}
}

// Start implements sched.Starter: it begins opening the GPU and loading the
// kernels into its context, once; Ready is closed when they are loaded or
// failed to be.
func (d *Device) Start() {
	d.start.Do(func() {
		d.g.Start()
		go func() {
			defer close(d.loaded)
			d.loadErr = d.g.Do(func() (err error) {
				d.k, err = LoadKernels()
				return err
			})
		}()
	})
}

// Ready implements sched.Starter: it is closed once the context is retained
// and the kernels are loaded, or either failed. It does not start the Device.
func (d *Device) Ready() <-chan struct{} { return d.loaded }

// OpenErr implements sched.Starter: why the context could not be retained or
// the kernels loaded, or nil. It starts the Device and waits for Ready.
func (d *Device) OpenErr() error {
	d.Start()
	<-d.loaded
	return d.loadErr
}

// do runs f as GPU.Do does, once the kernels are loaded.
func (d *Device) do(f func() error) error {
	if err := d.OpenErr(); err != nil {
		return err
	}
	return d.g.Do(f)
}

// Close releases nvJPEG's handles (when they were opened) and unloads the
// kernels (when they were loaded). Without a context nothing was opened; a
// Device that was never started never opens.
func (d *Device) Close() error {
	started := true
	d.start.Do(func() {
		started = false
		d.loadErr = ErrClosed
		close(d.loaded)
	})
	if !started {
		return nil
	}
	if <-d.loaded; d.g.retained() != nil {
		return nil
	}
	return d.g.Do(func() error {
		err := errors.Join(d.codec.close(), d.turbo.close())
		if d.k != nil {
			err = errors.Join(err, d.k.Unload())
		}
		return err
	})
}

// GPU returns the device's GPU.
func (d *Device) GPU() *GPU { return d.g }

// Name implements sched.Device: the GPU's ordinal and name, "GPU 0 (NVIDIA
// H200)"; its ordinal only, "GPU 0", until the device is found (it does not
// wait: a run that the CPU finished while the driver started names it so), or
// when it could not be.
func (d *Device) Name() string {
	select {
	case <-d.g.found:
		if name := d.g.Name(); name != "" {
			return fmt.Sprintf("GPU %d (%s)", d.g.Ordinal(), name)
		}
	default:
	}
	return fmt.Sprintf("GPU %d", d.g.Ordinal())
}

// BindThread implements sched.Device: it makes the GPU's context current on
// the calling (locked) thread.
func (d *Device) BindThread() error {
	if err := d.OpenErr(); err != nil {
		return err
	}
	if err := d.g.Err(); err != nil {
		return err
	}
	return d.g.Check(d.g.Context().SetCurrent())
}

// NewStream implements sched.Device with a non-blocking stream.
func (d *Device) NewStream() (sched.Stream, error) {
	s, err := cu.StreamCreate(true)
	return sched.Stream(s), d.g.Check(err)
}

// DestroyStream implements sched.Device; the stream's nvJPEG decoders are
// kept for the next stream made.
func (d *Device) DestroyStream(s sched.Stream) error {
	d.codec.dropStream(s)
	return d.g.Check(errors.Join(d.turbo.dropStream(s), cu.Stream(s).Destroy()))
}

// SyncStream implements sched.Device.
func (d *Device) SyncStream(s sched.Stream) error { return d.g.Check(cu.Stream(s).Synchronize()) }

// NewEvent implements sched.Device with a timing event.
func (d *Device) NewEvent() (sched.Event, error) {
	e, err := cu.EventCreate(true)
	return sched.Event(e), d.g.Check(err)
}

// DestroyEvent implements sched.Device.
func (d *Device) DestroyEvent(e sched.Event) error { return d.g.Check(cu.Event(e).Destroy()) }

// Record implements sched.Device.
func (d *Device) Record(e sched.Event, s sched.Stream) error {
	return d.g.Check(cu.Event(e).Record(cu.Stream(s)))
}

// StreamWait implements sched.Device.
func (d *Device) StreamWait(s sched.Stream, e sched.Event) error {
	return d.g.Check(cu.Stream(s).WaitEvent(cu.Event(e)))
}

// WaitEvent implements sched.Device by polling the event with a short
// backoff (10 µs up to 200 µs) instead of cuEventSynchronize, which spins a
// CPU core that decode workers need. A sticky error ends the wait at once.
func (d *Device) WaitEvent(e sched.Event) error {
	delay := 10 * time.Microsecond
	for {
		done, err := cu.Event(e).Query()
		if err != nil || done {
			return d.g.Check(err)
		}
		time.Sleep(delay)
		delay = min(2*delay, 200*time.Microsecond)
	}
}

// Elapsed implements sched.Device (CUDA's resolution is about 0.5 µs).
func (d *Device) Elapsed(start, end sched.Event) (time.Duration, error) {
	ms, err := cu.ElapsedTime(cu.Event(start), cu.Event(end))
	if err != nil {
		return 0, d.g.Check(err)
	}
	return time.Duration(float64(ms) * float64(time.Millisecond)), nil
}

// HostAlloc implements sched.Device with cu.MemHostAlloc.
func (d *Device) HostAlloc(n int) ([]byte, error) {
	b, err := cu.MemHostAlloc(n)
	return b, d.g.Check(err)
}

// HostFree implements sched.Device.
func (d *Device) HostFree(b []byte) error { return d.g.Check(cu.MemFreeHost(b)) }

// DevAlloc implements sched.Device with cuMemAlloc. The executor draws on it
// through a caching devmem.Allocator (sched.DeviceDriver).
func (d *Device) DevAlloc(n int) (sched.DevPtr, error) {
	if n <= 0 {
		return 0, fmt.Errorf("cudastage: device allocation of %d bytes", n)
	}
	p, err := cu.MemAlloc(uint64(n))
	return sched.DevPtr(p), d.g.Check(err)
}

// DevFree implements sched.Device.
func (d *Device) DevFree(p sched.DevPtr) error { return d.g.Check(cu.MemFree(cu.DevicePtr(p))) }

// IsOutOfMemory implements sched.OutOfMemory: a device allocator drawing on
// this Device releases its cache and retries when cuMemAlloc runs out.
func (d *Device) IsOutOfMemory(err error) bool { return cu.IsOutOfMemory(err) }

// HtoD implements sched.Device: an async copy from page-locked memory, or
// (sched.Config.Pageable) a synchronous one from Go memory after the
// stream's earlier work, since Go memory must never feed an async copy.
func (d *Device) HtoD(s sched.Stream, dst sched.DevPtr, off int, src []byte) error {
	p := cu.DevicePtr(dst) + cu.DevicePtr(off)
	if len(src) == 0 {
		return nil
	}
	if cu.IsPinned(src) {
		return d.g.Check(cu.MemcpyHtoDAsync(p, src, cu.Stream(s)))
	}
	if err := cu.Stream(s).Synchronize(); err != nil {
		return d.g.Check(err)
	}
	return d.g.Check(cu.MemcpyHtoD(p, src))
}

// DtoH implements sched.Device, with HtoD's rule for Go memory.
func (d *Device) DtoH(s sched.Stream, dst []byte, src sched.DevPtr, off int) error {
	p := cu.DevicePtr(src) + cu.DevicePtr(off)
	if len(dst) == 0 {
		return nil
	}
	if cu.IsPinned(dst) {
		return d.g.Check(cu.MemcpyDtoHAsync(dst, p, cu.Stream(s)))
	}
	if err := cu.Stream(s).Synchronize(); err != nil {
		return d.g.Check(err)
	}
	return d.g.Check(cu.MemcpyDtoH(dst, p))
}

// batchOf turns the executor's placements into a kernel Batch: images are
// tightly packed (stride W·C); a histogram's destination is its counts, an
// encoder's its file, a reduction's its value.
func batchOf(call *sched.OpCall) *Batch {
	b := &Batch{Op: call.Op, Src: make([]BatchImage, len(call.Images)), Dst: make([]BatchImage, len(call.Images))}
	hist := call.Op.Hist
	if call.Op.Array {
		b.Dims = make([][]int, len(call.Images))
	}
	for i, im := range call.Images {
		if b.Dims != nil {
			b.Dims[i] = im.Dims
		}
		b.Src[i] = BatchImage{W: im.In.W, H: im.In.H, C: im.In.C, Off: uint64(im.SrcOff), Stride: im.In.W * im.In.C}
		switch {
		case call.Op.Reduce != nil:
			b.Dst[i] = BatchImage{Off: uint64(im.ValueOff)}
		case call.Op.Encode != nil:
			b.Dst[i] = BatchImage{Off: uint64(im.DstOff)}
		case hist:
			b.Dst[i] = BatchImage{Off: uint64(im.HistOff)}
		default:
			b.Dst[i] = BatchImage{W: im.Out.W, H: im.Out.H, C: im.Out.C, Off: uint64(im.DstOff), Stride: im.Out.W * im.Out.C}
		}
	}
	return b
}

// CheckOp implements sched.Device: the op's stage has a launcher here and
// the launcher accepts the op's arguments. A user kernel is compiled and
// loaded here, so that its errors come before any input is touched.
func (d *Device) CheckOp(op sched.Op) error {
	if op.Array {
		l, err := arrayLauncherFor(op)
		if err != nil || l.prepare == nil {
			return err
		}
		return d.do(func() error { return l.prepare(d.k, d.g.Device(), op.Args) })
	}
	l, err := launcherFor(op)
	if err != nil || l.prepare == nil {
		return err
	}
	return d.do(func() error { return l.prepare(d.k, d.g.Device(), op.Args) })
}

// TableBytes implements sched.Device.
func (d *Device) TableBytes(op sched.Op, n int) int { return TableBytes(op, n) }

// ScratchBytes implements sched.Device: the separable filters keep a uint16
// per sample, the PNG encoder its block records and bit streams.
func (d *Device) ScratchBytes(op sched.Op, srcCap, n int) int {
	return int(MaxScratchBytes(op, uint64(srcCap), n))
}

// EncodeTable implements sched.Device.
func (d *Device) EncodeTable(call *sched.OpCall, dst []byte) error {
	return batchOf(call).EncodeTable(dst)
}

// Run implements sched.Device: the op's kernels (with the histogram's
// memset) queued on the stream, reading the table the executor uploaded.
func (d *Device) Run(s sched.Stream, call *sched.OpCall) error {
	buf := Buffers{
		Src:     cu.DevicePtr(call.Src),
		Dst:     cu.DevicePtr(call.Dst),
		Scratch: cu.DevicePtr(call.Scratch),
		Table:   cu.DevicePtr(call.Table) + cu.DevicePtr(call.TableOff),
		Lens:    cu.DevicePtr(call.Lens),
	}
	switch {
	case call.Op.Hist:
		buf.Dst = cu.DevicePtr(call.Hist)
	case call.Op.Reduce != nil:
		buf.Dst = cu.DevicePtr(call.Values)
	}
	return d.g.Check(d.k.Run(cu.Stream(s), batchOf(call), buf))
}
