// Package cudastage runs pipeline work on CUDA GPUs: device discovery, the
// per-device handle that makes driver calls safe from goroutines, batched
// kernel launches and the multi-stream executor.
//
// The CUDA driver binding itself is package cu; memory pools are
// memory/pinned (host) and memory/devmem (device), which the executor
// draws on through Device (sched.HostAllocator, sched.DeviceDriver).
package cudastage

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync"

	"github.com/imgpipe/imgpipe/cudastage/cu"
	"github.com/imgpipe/imgpipe/cudastage/sched"
)

// ErrClosed is returned by Do after Close.
var ErrClosed = errors.New("cudastage: GPU closed")

// ErrNoSuchGPU is wrapped by the error of a GPU whose ordinal names no device
// the driver sees (OpenGPU's for a negative one; otherwise every call's that
// needs the device, once the driver counted them), as opposed to no GPU being
// usable at all (cu.ErrNoDriver, cu.ErrNoDevice, cu.ErrDriverTooOld): a caller
// may fall back to the CPU on the latter but should report the former, which
// is a mistake in the request.
var ErrNoSuchGPU = sched.ErrNoSuchDevice

// GPU is one device with its primary context retained. Driver calls that
// need the context go through Do (or a goroutine bound with Bind), which
// pins the goroutine to its OS thread and makes the context current there:
// the driver keeps the current context per OS thread, and Go moves
// goroutines between threads.
//
// After a sticky error (illegal address, launch failure, ...) the device is
// unusable: the GPU remembers the first one (Err) and Do refuses to run
// anything more, returning it. A GPU is safe for concurrent use.
type GPU struct {
	ordinal int
	start   sync.Once // Start's, or Close's when it comes first
	// found is closed once the driver is initialised and the device found, dev and name
	// or findErr set; opened once its primary context is retained, ctx or ctxErr set
	// (in the background, from Start).
	found   chan struct{}
	dev     cu.Device
	name    string
	findErr error
	opened  chan struct{}
	ctx     cu.Context
	ctxErr  error

	mu     sync.Mutex
	fault  error
	closed bool
}

// OpenGPU checks that the driver library is there and new enough, and returns
// the GPU with the given ordinal, not opened yet. Start (or the first call that
// needs the device or its context) initialises the driver, finds the device and
// retains its primary context in the background: the driver takes a few tenths
// of a second for that, which a run spends on its CPU workers (Device.Ready),
// and a run that ends before needing the GPU does not pay it at all. Calls
// that need the device or the context wait for it, and fail with the reason
// when it could not be had: no device, or an ordinal that is not one of the
// GPUs (wrapping ErrNoSuchGPU, saying how many there are), or the driver's
// error. OpenGPU's own error says why no GPU can be used at all (no libcuda,
// driver too old), or refuses a negative ordinal.
func OpenGPU(ordinal int) (*GPU, error) {
	if ordinal < 0 {
		// Refused before loading the driver: it is wrong on every machine.
		return nil, fmt.Errorf("cudastage: %w %d: GPU ordinals count from 0", ErrNoSuchGPU, ordinal)
	}
	if err := cu.Find(); err != nil {
		return nil, err
	}
	return &GPU{ordinal: ordinal, found: make(chan struct{}), opened: make(chan struct{})}, nil
}

// Start begins opening the GPU in the background, once. A GPU closed before it
// started never opens: its calls fail with ErrClosed.
func (g *GPU) Start() {
	g.start.Do(func() {
		go func() {
			defer close(g.opened)
			g.dev, g.name, g.findErr = findDevice(g.ordinal)
			close(g.found)
			if g.findErr == nil {
				g.ctx, g.ctxErr = g.dev.PrimaryCtxRetain()
			}
		}()
	})
}

// findDevice initialises the driver and returns the device with the given
// ordinal and its name.
func findDevice(ordinal int) (cu.Device, string, error) {
	if err := cu.Load(); err != nil {
		return 0, "", err
	}
	n, err := cu.DeviceCount()
	if err != nil {
		return 0, "", err
	}
	if ordinal >= n {
		return 0, "", ordinalError(ordinal, n, os.Getenv("CUDA_VISIBLE_DEVICES"))
	}
	dev, err := cu.DeviceGet(ordinal)
	if err != nil {
		return 0, "", err
	}
	name, err := dev.Name()
	return dev, name, err
}

// ordinalError says that GPU ordinal does not exist among the n the driver
// sees. CUDA_VISIBLE_DEVICES (visible, when set) hides and renumbers GPUs, so
// an ordinal that nvidia-smi lists can still be out of range; the message
// names it so that the user looks there.
func ordinalError(ordinal, n int, visible string) error {
	var sees string
	switch n {
	case 0:
		sees = "the driver sees no GPU"
	case 1:
		sees = "the driver sees 1 GPU, numbered 0"
	default:
		sees = fmt.Sprintf("the driver sees %d GPUs, numbered 0 to %d", n, n-1)
	}
	if visible != "" {
		sees += fmt.Sprintf(" (CUDA_VISIBLE_DEVICES=%s selects and renumbers them)", visible)
	}
	return fmt.Errorf("cudastage: %w %d: %s", ErrNoSuchGPU, ordinal, sees)
}

// Ordinal returns the device's index.
func (g *GPU) Ordinal() int { return g.ordinal }

// Device returns the device handle, once found (0 when it could not be).
func (g *GPU) Device() cu.Device {
	g.Start()
	<-g.found
	return g.dev
}

// Name is the device's name as the driver gives it ("NVIDIA H200"), once found;
// "" when it could not be.
func (g *GPU) Name() string {
	g.Start()
	<-g.found
	return g.name
}

// Context returns the primary context, once retained (0 when it could not be).
func (g *GPU) Context() cu.Context {
	g.Start()
	<-g.opened
	return g.ctx
}

// retained waits for the primary context and returns why it could not be
// retained (or the device found), or nil.
func (g *GPU) retained() error {
	g.Start()
	<-g.opened
	if g.findErr != nil {
		return g.findErr
	}
	return g.ctxErr
}

// Do runs f on the calling goroutine, locked to its OS thread with the
// GPU's context current (once retained: see OpenGPU), and returns f's error.
// Without a context it returns why. A sticky error returned by f
// marks the GPU as faulted. Do may be nested and called from many goroutines
// at once.
func (g *GPU) Do(f func() error) error {
	release, err := g.Bind()
	if err != nil {
		return err
	}
	defer release()
	return g.Check(f())
}

// Bind locks the calling goroutine to its OS thread and makes the context
// current, for goroutines that issue driver calls for a long time (a
// submission loop). The returned release unlocks the thread; it must be
// called on the same goroutine. Errors from calls made while bound should
// go through Check.
func (g *GPU) Bind() (release func(), err error) {
	if err := g.Err(); err != nil {
		return nil, err
	}
	if err := g.retained(); err != nil {
		return nil, err
	}
	runtime.LockOSThread()
	if err := g.ctx.SetCurrent(); err != nil {
		runtime.UnlockOSThread()
		return nil, g.Check(err)
	}
	return runtime.UnlockOSThread, nil
}

// Check returns err unchanged, first recording it as the GPU's fault if it is
// sticky, so that later Do calls fail fast.
func (g *GPU) Check(err error) error {
	if err != nil && cu.IsSticky(err) {
		g.mu.Lock()
		if g.fault == nil {
			g.fault = err
		}
		g.mu.Unlock()
	}
	return err
}

// Err returns ErrClosed after Close, the first sticky error seen (wrapped,
// so cu.IsSticky still holds), or nil while the GPU is usable.
func (g *GPU) Err() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	switch {
	case g.closed:
		return ErrClosed
	case g.fault != nil:
		return fmt.Errorf("GPU %d unusable after a device fault: %w", g.ordinal, g.fault)
	}
	return nil
}

// Close releases the primary context, once retained; a GPU that was never
// started is not opened then. Streams, modules and memory of the context must
// have been released first (pools closed). Close is idempotent.
func (g *GPU) Close() error {
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return nil
	}
	g.closed = true
	g.mu.Unlock()
	started := true
	g.start.Do(func() {
		started = false
		g.findErr = ErrClosed
		close(g.found)
		close(g.opened)
	})
	if !started || g.retained() != nil {
		return nil // nothing was retained
	}
	return g.dev.PrimaryCtxRelease()
}
