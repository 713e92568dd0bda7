package gpu

import (
	"errors"
	"fmt"

	"github.com/imgpipe/imgpipe/cudastage/sched"
	"github.com/imgpipe/imgpipe/memory/devmem"
	"github.com/imgpipe/imgpipe/memory/pinned"
	"github.com/imgpipe/imgpipe/pipeline"
)

// Set holds what is expensive to open on accelerators for many runs, one after another:
// the devices (a CUDA device keeps its context, nvJPEG handles and loaded kernels while it
// is open) and, per device, the page-locked pool and device allocator its runs' slots
// share, so that a run after the first takes memory without page-locking or allocating it
// again, which also holds the device up while it runs.
type Set struct {
	devs  []sched.Device
	pools []pools
}

// pools are the memory one device's slots share across runs (sched.Config.HostPool and
// DevicePool).
type pools struct {
	host *pinned.Pool
	dev  *devmem.Allocator
}

// NewSet makes a Set over devs, opened by the caller, with a page-locked pool and a device
// allocator for each. The pools' budgets are no limit of their own: each run's executor
// checks its slots against its Options.PinnedBytes.
func NewSet(devs ...sched.Device) (*Set, error) {
	if len(devs) == 0 {
		return nil, errors.New("gpu: a set without a device")
	}
	s := &Set{devs: devs}
	for _, d := range devs {
		host, err := pinned.New(sched.MaxSlotBytes*sched.MaxSlots, sched.HostAllocator(d))
		if err != nil {
			return nil, errors.Join(fmt.Errorf("device %s: %w", d.Name(), err), s.Close())
		}
		dev, err := devmem.New(sched.DeviceDriver(d), sched.MaxSlotBytes*sched.MaxSlots)
		if err != nil {
			return nil, errors.Join(fmt.Errorf("device %s: %w", d.Name(), err), host.Close(), s.Close())
		}
		s.pools = append(s.pools, pools{host: host, dev: dev})
	}
	return s, nil
}

// Devices are the set's devices, in the order NewSet got them.
func (s *Set) Devices() []sched.Device { return s.devs }

// Backend is the backend of one run on every device of the set with o's settings, its
// Device and Devices replaced by the set's.
func (s *Set) Backend(o Options) pipeline.Backend {
	o.Device, o.Devices, o.pools = nil, s.devs, s.pools
	if len(s.devs) == 1 {
		o.Device, o.Devices = s.devs[0], nil
	}
	return &o
}

// Close frees the pools' memory, once no run uses them; the devices stay open, for their
// opener to close. Later calls do nothing.
func (s *Set) Close() error {
	var errs []error
	for _, p := range s.pools {
		errs = append(errs, p.host.Close(), p.dev.Close())
	}
	s.pools = nil
	return errors.Join(errs...)
}

// PoolStats is what one device's pools of a Set hold.
type PoolStats struct {
	// Device is the device's name.
	Device string
	// Pinned is its page-locked pool's, Memory its device allocator's.
	Pinned pinned.Stats
	Memory devmem.Stats
}

// PoolStats returns a snapshot of each device's pools, in the order of Devices; none once
// the set is closed.
func (s *Set) PoolStats() []PoolStats {
	out := make([]PoolStats, len(s.pools))
	for i, p := range s.pools {
		out[i] = PoolStats{Device: s.devs[i].Name(), Pinned: p.host.Stats(), Memory: p.dev.Stats()}
	}
	return out
}
