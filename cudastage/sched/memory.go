package sched

import (
	"errors"
	"math"
	"runtime"

	"github.com/imgpipe/imgpipe/memory/devmem"
	"github.com/imgpipe/imgpipe/memory/pinned"
)

// OutOfMemory is implemented by a Device that can tell which DevAlloc errors
// mean that the device ran out of memory (the CUDA device can). A device
// allocator drawing on it (DeviceDriver) then releases the blocks it caches
// and retries once before it fails with a *devmem.OOMError; on other devices
// DevAlloc's error comes back as it is.
type OutOfMemory interface {
	IsOutOfMemory(err error) bool
}

// HostAllocator returns the pinned.Allocator of dev's page-locked memory
// (Device.HostAlloc and HostFree), for a pinned.Pool that several executors
// on dev share (Config.HostPool). Each call binds dev to the calling
// goroutine's thread, so the pool may be used and closed from any goroutine.
func HostAllocator(dev Device) pinned.Allocator { return hostMemory{dev} }

type hostMemory struct{ dev Device }

// Alloc implements pinned.Allocator with Device.HostAlloc.
func (h hostMemory) Alloc(n int) (b []byte, err error) {
	err = bound(h.dev, func() error {
		b, err = h.dev.HostAlloc(n)
		return err
	})
	return b, err
}

// Free implements pinned.Allocator with Device.HostFree.
func (h hostMemory) Free(b []byte) error {
	return bound(h.dev, func() error { return h.dev.HostFree(b) })
}

// DeviceDriver returns the devmem.Driver of dev's memory (Device.DevAlloc
// and DevFree), for a devmem.Allocator that several executors on dev share
// (Config.DevicePool). Each call binds dev to the calling goroutine's thread,
// so the allocator may be used and closed from any goroutine.
func DeviceDriver(dev Device) devmem.Driver { return deviceMemory{dev} }

type deviceMemory struct{ dev Device }

// MemAlloc implements devmem.Driver with Device.DevAlloc.
func (d deviceMemory) MemAlloc(n uint64) (p devmem.Ptr, err error) {
	err = bound(d.dev, func() error {
		var q DevPtr
		q, err = d.dev.DevAlloc(int(n))
		p = devmem.Ptr(q)
		return err
	})
	return p, err
}

// MemFree implements devmem.Driver with Device.DevFree.
func (d deviceMemory) MemFree(p devmem.Ptr) error {
	return bound(d.dev, func() error { return d.dev.DevFree(DevPtr(p)) })
}

// IsOutOfMemory implements devmem.Driver: the Device says, when it
// implements OutOfMemory; otherwise no error counts as out of memory.
func (d deviceMemory) IsOutOfMemory(err error) bool {
	o, ok := d.dev.(OutOfMemory)
	return ok && o.IsOutOfMemory(err)
}

// bound runs fn on the calling goroutine locked to its OS thread, with dev
// bound to that thread.
func bound(dev Device, fn func() error) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := dev.BindThread(); err != nil {
		return err
	}
	return fn()
}

// slotStream is the devmem stream of every block the executor holds. The
// executor frees a block only once the device finished with it (after the
// last batch that used it completed, or after every stream drained), so its
// blocks need no stream ordering, and one stream lets executors that run
// one after another on a shared allocator reuse each other's blocks.
const slotStream devmem.Stream = 0

// openPools takes the pools of the Config, or makes the executor's own: a
// page-locked pool (on the Go heap when Pageable) and a device allocator,
// whose budgets are MaxHostBytes and MaxDeviceBytes, or else the host and
// dev bytes that New allocates.
func (e *Executor) openPools(host, dev int64) error {
	c := e.cfg
	e.hostPool, e.devPool = c.HostPool, c.DevicePool
	if e.hostPool == nil {
		alloc := HostAllocator(e.dev)
		if c.Pageable {
			alloc = pinned.Heap
		}
		if c.MaxHostBytes > 0 {
			host = c.MaxHostBytes
		}
		p, err := pinned.New(host, alloc)
		if err != nil {
			return err
		}
		e.hostPool, e.ownHost = p, true
	}
	if e.devPool == nil {
		if c.MaxDeviceBytes > 0 {
			dev = c.MaxDeviceBytes
		}
		a, err := devmem.New(DeviceDriver(e.dev), uint64(dev))
		if err != nil {
			return err
		}
		e.devPool, e.ownDev = a, true
	}
	return nil
}

// closePools closes the pools the executor made; shared ones stay open.
func (e *Executor) closePools() error {
	var errs []error
	if e.ownHost && e.hostPool != nil {
		errs = append(errs, e.hostPool.Close())
	}
	if e.ownDev && e.devPool != nil {
		errs = append(errs, e.devPool.Close())
	}
	return errors.Join(errs...)
}

// limits are the page-locked and device bytes the executor may hold: the
// Config's maxima, and the budgets of shared pools (which New checks before
// allocating, since a pool's Get would wait for memory the executor holds
// itself). 0 is no limit.
func (e *Executor) limits() (host, dev int64) {
	c := e.cfg
	host, dev = c.MaxHostBytes, c.MaxDeviceBytes
	if c.HostPool != nil {
		if b := c.HostPool.Stats().Budget; host <= 0 || b < host {
			host = b
		}
	}
	if c.DevicePool != nil {
		if b := int64(min(c.DevicePool.Stats().Budget, math.MaxInt64)); dev <= 0 || b < dev {
			dev = b
		}
	}
	return host, dev
}
