// Package sourcemodule is PyCUDA's SourceModule flow on imgpipe's pieces:
// compile CUDA C++ source at run time (NVRTC, cached on disk), get a kernel
// by name, allocate device memory (a devmem caching allocator) and
// page-locked host memory (a pinned pool), copy host to device and back
// asynchronously on a stream, launch over a grid of blocks with typed
// arguments, synchronise, free.
//
//	c, err := sourcemodule.Open(0, sourcemodule.Config{})  // PyCUDA: import pycuda.autoinit
//	m, err := c.Compile("double.cu", src)                  // SourceModule(src)
//	f, err := m.Function("double_array")                   // mod.get_function("double_array")
//	d, err := c.Alloc(4 * n)                               // cuda.mem_alloc(a.nbytes)
//	err = c.CopyHtoD(d, host)                              // cuda.memcpy_htod(d, a)
//	err = f.Launch(grid, block, sourcemodule.Ptr(d), sourcemodule.Int(n))
//	err = c.CopyDtoH(host, d)                              // cuda.memcpy_dtoh(a, d)
//	err = c.Synchronize()
//
// A Context owns one stream: copies and launches queue on it in the order
// they are made, and Synchronize waits for all of them. Every driver call is
// made with the GPU's context current on a locked OS thread (cudastage.GPU),
// so a Context may be used from any goroutine, though not from two at once.
//
// Kernel arguments are packed as package userkernel packs a kernel stage's
// parameters (C int and float), plus device pointers. Module.StageArgs turns
// a compiled kernel into the arguments of the pipeline stage "kernel"
// (package pipeline/kernelstage).
package sourcemodule

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/imgpipe/imgpipe/cudastage"
	"github.com/imgpipe/imgpipe/cudastage/cu"
	"github.com/imgpipe/imgpipe/cudastage/nvrtc"
	"github.com/imgpipe/imgpipe/cudastage/sched"
	"github.com/imgpipe/imgpipe/memory/devmem"
	"github.com/imgpipe/imgpipe/memory/pinned"
)

// Default budgets of a Context's pools, used when Config leaves them 0.
const (
	DefaultHostBytes   = 256 << 20 // page-locked host memory
	DefaultDeviceBytes = 1 << 30   // device memory
)

// Config sets a Context's budgets and compile cache.
type Config struct {
	// HostBytes bounds the page-locked memory HostAlloc hands out (0:
	// DefaultHostBytes).
	HostBytes int64
	// DeviceBytes bounds the device memory Alloc hands out (0:
	// DefaultDeviceBytes).
	DeviceBytes int64
	// CacheDir is where compiled code is cached ("": nvrtc.DefaultCacheDir;
	// "-": no cache).
	CacheDir string
}

// devStream is the devmem stream of every block: a Context has one CUDA
// stream, so every block is in that stream's order.
const devStream devmem.Stream = 0

// Context is one GPU with a stream, a page-locked pool, a device allocator
// and the modules compiled on it. Close releases them all.
type Context struct {
	dev      *cudastage.Device
	closeDev func() error
	stream   sched.Stream
	host     *pinned.Pool
	mem      *devmem.Allocator
	arch     int
	cacheDir string

	mu      sync.Mutex
	modules []*Module
	closed  bool
}

// Open opens GPU ordinal with cfg's budgets. The error says why no GPU can
// be used (no libcuda, no device, ...), as cudastage.Open does.
func Open(ordinal int, cfg Config) (*Context, error) {
	if cfg.HostBytes < 0 || cfg.DeviceBytes < 0 {
		return nil, fmt.Errorf("sourcemodule: negative budget (host %d, device %d bytes)", cfg.HostBytes, cfg.DeviceBytes)
	}
	cacheDir := cfg.CacheDir
	switch cacheDir {
	case "":
		if d, err := nvrtc.DefaultCacheDir(); err == nil {
			cacheDir = d
		} // else compile every time rather than fail
	case "-":
		cacheDir = ""
	}
	dev, closeDev, err := cudastage.Open(ordinal)
	if err != nil {
		return nil, err
	}
	c := &Context{dev: dev, closeDev: closeDev, cacheDir: cacheDir}
	if err := c.init(orDefault(cfg.HostBytes, DefaultHostBytes), orDefault(cfg.DeviceBytes, DefaultDeviceBytes)); err != nil {
		return nil, errors.Join(err, c.Close())
	}
	return c, nil
}

// orDefault returns v, or def when v is 0.
func orDefault(v, def int64) int64 {
	if v == 0 {
		return def
	}
	return v
}

// init reads the architecture and makes the stream and pools.
func (c *Context) init(hostBytes, devBytes int64) error {
	major, minor, err := c.dev.GPU().Device().ComputeCapability()
	if err != nil {
		return err
	}
	c.arch = 10*major + minor
	if err := c.dev.GPU().Do(func() (err error) {
		c.stream, err = c.dev.NewStream()
		return err
	}); err != nil {
		return err
	}
	if c.host, err = pinned.New(hostBytes, sched.HostAllocator(c.dev)); err != nil {
		return err
	}
	c.mem, err = devmem.New(sched.DeviceDriver(c.dev), uint64(devBytes))
	return err
}

// Arch returns the GPU's compute capability as 10·major+minor (90 for an
// H100), the architecture Compile targets.
func (c *Context) Arch() int { return c.arch }

// Device returns the Context's GPU as the scheduler's device, so that a
// pipeline can run on the same GPU (pipeline/gpu.Options.Device), for example
// one with a stage from Module.StageArgs.
func (c *Context) Device() *cudastage.Device { return c.dev }

// do runs f with the GPU's context current, unless the Context is closed.
func (c *Context) do(f func() error) error {
	c.mu.Lock()
	closed := c.closed
	c.mu.Unlock()
	if closed {
		return ErrClosed
	}
	return c.dev.GPU().Do(f)
}

// ErrClosed is returned by a Context's methods after Close.
var ErrClosed = errors.New("sourcemodule: context closed")

// Synchronize waits until every copy and launch queued so far is done. A
// kernel's fault (an illegal address) is reported here, as a sticky error
// (cu.IsSticky) after which the GPU is unusable.
func (c *Context) Synchronize() error {
	return c.do(func() error { return c.dev.SyncStream(c.stream) })
}

// Close waits for the stream, unloads the modules, releases the pools and
// the GPU. Free every buffer first: memory still held when the GPU is
// released is only reclaimed with the process. Close is idempotent.
func (c *Context) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	mods := c.modules
	c.modules = nil
	c.mu.Unlock()
	g := c.dev.GPU()
	var errs []error
	if c.stream != 0 {
		errs = append(errs, g.Do(func() error {
			return errors.Join(c.dev.SyncStream(c.stream), c.dev.DestroyStream(c.stream))
		}))
	}
	for _, m := range mods {
		errs = append(errs, g.Do(m.mod.Unload))
	}
	if c.host != nil {
		errs = append(errs, c.host.Close())
	}
	if c.mem != nil {
		errs = append(errs, c.mem.Close())
	}
	errs = append(errs, c.closeDev())
	return errors.Join(errs...)
}

// HostBuffer is page-locked host memory from HostAlloc: async copies run
// from and into it at full speed.
type HostBuffer struct {
	buf *pinned.Buffer
	c   *Context
}

// Bytes returns the buffer's memory. Do not touch it while a copy from or
// into it is queued (until Synchronize).
func (h *HostBuffer) Bytes() []byte { return h.buf.Bytes() }

// Float32s returns the buffer's memory as float32s (native byte order); its
// length is Len()/4, rounded down.
func (h *HostBuffer) Float32s() []float32 { return float32s(h.buf.Bytes()) }

// Len returns the buffer's size in bytes.
func (h *HostBuffer) Len() int { return h.buf.Len() }

// HostAlloc returns n bytes of page-locked host memory from the Context's
// pool, waiting while the pool's budget is in use (until ctx is done); a
// request over the whole budget fails at once. Its contents are undefined.
func (c *Context) HostAlloc(ctx context.Context, n int) (*HostBuffer, error) {
	c.mu.Lock()
	closed := c.closed
	c.mu.Unlock()
	if closed {
		return nil, ErrClosed
	}
	b, err := c.host.Get(ctx, n)
	if err != nil {
		return nil, err
	}
	return &HostBuffer{buf: b, c: c}, nil
}

// Free returns the buffer to its pool. It must not be in use by a queued
// copy (Synchronize first).
func (h *HostBuffer) Free() error {
	if h.buf == nil {
		return errors.New("sourcemodule: host buffer freed twice")
	}
	b := h.buf
	h.buf = nil
	return h.c.host.Put(b)
}

// DeviceBuffer is device memory from Alloc.
type DeviceBuffer struct {
	blk *devmem.Block
	c   *Context
}

// Len returns the buffer's size in bytes.
func (d *DeviceBuffer) Len() int { return int(d.blk.Len()) }

// Alloc returns n bytes of device memory from the Context's allocator
// (contents undefined). A request over the budget fails with a
// *devmem.OOMError before the driver is asked.
func (c *Context) Alloc(n int) (*DeviceBuffer, error) {
	if n <= 0 {
		return nil, fmt.Errorf("sourcemodule: device allocation of %d bytes", n)
	}
	var blk *devmem.Block
	if err := c.do(func() (err error) {
		blk, err = c.mem.Alloc(uint64(n), devStream)
		return err
	}); err != nil {
		return nil, err
	}
	return &DeviceBuffer{blk: blk, c: c}, nil
}

// Free returns the buffer to the allocator's cache. Work already queued on
// the stream may still use it: only later work on the same stream reuses it.
func (d *DeviceBuffer) Free() error {
	if d.blk == nil {
		return errors.New("sourcemodule: device buffer freed twice")
	}
	b := d.blk
	d.blk = nil
	return d.c.mem.Free(b)
}

// ptr returns the buffer's device address, or why it cannot be used in c.
func (d *DeviceBuffer) ptr(c *Context) (uint64, error) {
	switch {
	case d == nil || d.blk == nil:
		return 0, errors.New("sourcemodule: device buffer is nil or freed")
	case d.c != c:
		return 0, errors.New("sourcemodule: device buffer of another context")
	}
	return uint64(d.blk.Ptr), nil
}

// CopyHtoD queues a copy of src into dst on the stream. The sizes must be
// equal.
func (c *Context) CopyHtoD(dst *DeviceBuffer, src *HostBuffer) error {
	p, h, err := c.copyArgs(dst, src)
	if err != nil {
		return err
	}
	return c.do(func() error { return c.dev.HtoD(c.stream, sched.DevPtr(p), 0, h) })
}

// CopyDtoH queues a copy of src into dst on the stream; dst holds the data
// after Synchronize. The sizes must be equal.
func (c *Context) CopyDtoH(dst *HostBuffer, src *DeviceBuffer) error {
	p, h, err := c.copyArgs(src, dst)
	if err != nil {
		return err
	}
	return c.do(func() error { return c.dev.DtoH(c.stream, h, sched.DevPtr(p), 0) })
}

// copyArgs checks a copy's buffers.
func (c *Context) copyArgs(d *DeviceBuffer, h *HostBuffer) (uint64, []byte, error) {
	p, err := d.ptr(c)
	if err != nil {
		return 0, nil, err
	}
	switch {
	case h == nil || h.buf == nil:
		return 0, nil, errors.New("sourcemodule: host buffer is nil or freed")
	case h.c != c:
		return 0, nil, errors.New("sourcemodule: host buffer of another context")
	case h.Len() != d.Len():
		return 0, nil, fmt.Errorf("sourcemodule: copy between %d host bytes and %d device bytes: sizes differ", h.Len(), d.Len())
	}
	return p, h.Bytes(), nil
}

// kernelStream is the stream launches queue on.
func (c *Context) kernelStream() cu.Stream { return cu.Stream(c.stream) }
