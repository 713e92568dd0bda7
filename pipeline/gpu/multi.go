package gpu

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/imgpipe/imgpipe/cudastage/sched"
	"github.com/imgpipe/imgpipe/pipeline"
)

// A run over several devices (Options.Devices) has one executor per device, each with
// its own streams, slots and codecs, and shares the decode and save workers. An input goes
// to whichever executor can take it now (sched.Config.Room): no static split, so a slower
// or busier device, whose slots come back later, takes less. When none can, the decode
// worker waits until any of them frees a slot. A device error on one ends the run, as on
// one device: the run's context stops the others.

// devices are the accelerators of o: Device, or Devices.
func (o *Options) devices() ([]sched.Device, error) {
	switch {
	case o.Device != nil && len(o.Devices) > 0:
		return nil, errors.New("run: GPU options with both Device and Devices")
	case o.Device != nil:
		return []sched.Device{o.Device}, nil
	case len(o.Devices) == 0:
		return nil, errors.New("run: GPU options without a device")
	case slices.Contains(o.Devices, nil):
		return nil, errors.New("run: GPU options with a nil device among Devices")
	}
	return o.Devices, nil
}

// name names the run's devices for the summary: the device's name, or every device's,
// comma-separated.
func (g *gpuRun) name() string {
	names := make([]string, len(g.devs))
	for i, d := range g.devs {
		names[i] = d.Name()
	}
	return strings.Join(names, ", ")
}

// sameOnEvery checks that every device runs ops, the first device's segment, and decodes
// files as the first does: one plan, checked once, runs on each of them.
func sameOnEvery(plan *pipeline.Plan, devs []sched.Device, ops []sched.Op, encode bool) error {
	first, err := fileDecoderFor(plan, devs[0])
	if err != nil {
		return err
	}
	for _, d := range devs[1:] {
		dops, err := deviceOps(plan, d, encode)
		if err != nil {
			return fmt.Errorf("run: device %s: %w", d.Name(), err)
		}
		if a, b := sched.SegmentString(ops), sched.SegmentString(dops); a != b {
			return fmt.Errorf("run: %s runs %q but %s runs %q: every device of a run must run the same chain", devs[0].Name(), a, d.Name(), b)
		}
		fd, err := fileDecoderFor(plan, d)
		if err != nil {
			return fmt.Errorf("run: device %s: %w", d.Name(), err)
		}
		if (fd == nil) != (first == nil) {
			return fmt.Errorf("run: %s and %s differ in decoding files: every device of a run must", devs[0].Name(), d.Name())
		}
	}
	return nil
}

// executors are a GPU run's executors, one per device, and the rule that places each
// reservation on one of them.
type executors struct {
	list []*sched.Executor
	devs []sched.Device // list[i] runs on devs[i]
	next atomic.Uint32  // spreads where reservations look first
	mu   sync.Mutex
	// room is closed, and replaced, whenever an executor frees a slot (sched.Config.Room):
	// a reservation that found no room waits on it. nil with one executor, whose
	// reservations wait inside it.
	room chan struct{}
}

// startExecutors starts an executor on every device of run under ctx; on a failure it
// closes those it started.
func startExecutors(ctx context.Context, run *gpuRun, trace sched.Tracer) (*executors, error) {
	x := &executors{devs: run.devs}
	cfg := run.cfg
	cfg.Trace = trace
	if len(run.devs) > 1 {
		x.room = make(chan struct{})
		cfg.Room = x.freed
	}
	// One device after another: starting them at once was no faster, since their JPEG
	// decoders' set-up does not run in parallel (bench/results/2026-12-07-code-comments.md).
	for i, dev := range run.devs {
		if run.pools != nil {
			cfg.HostPool, cfg.DevicePool = run.pools[i].host, run.pools[i].dev
		}
		e, err := sched.New(ctx, dev, cfg)
		if err != nil {
			return nil, errors.Join(fmt.Errorf("device %s: %w", dev.Name(), err), x.close())
		}
		x.list = append(x.list, e)
	}
	return x, nil
}

// freed is sched.Config.Room: it wakes the reservations waiting for room.
func (x *executors) freed() {
	x.mu.Lock()
	close(x.room)
	x.room = make(chan struct{})
	x.mu.Unlock()
}

// reserve makes a reservation with try (Reserve, ReserveFile or ReserveArray) on an
// executor that has room for it now, looking first at a different executor each time so
// that equal devices share the work; when none has room it waits until one frees a slot.
// An input too large for every executor gives the last ErrTooLarge. Any other error (the
// executor stopped, ctx ended) is returned at once.
func (x *executors) reserve(ctx context.Context, try func(*sched.Executor) (*sched.Reservation, error)) (*sched.Reservation, error) {
	if len(x.list) == 1 {
		return try(x.list[0])
	}
	for {
		x.mu.Lock()
		room := x.room // taken before trying: a slot freed meanwhile closes it
		x.mu.Unlock()
		first := int(x.next.Add(1))
		tooLarge := 0
		var err error
		for i := range x.list {
			var rsv *sched.Reservation
			rsv, err = try(x.list[(first+i)%len(x.list)])
			switch {
			case err == nil:
				return rsv, nil
			case errors.Is(err, sched.ErrTooLarge):
				tooLarge++
			case !errors.Is(err, sched.ErrNoRoom):
				return nil, err
			}
		}
		if tooLarge == len(x.list) {
			return nil, err
		}
		select {
		case <-room:
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		}
	}
}

// results is every executor's results on one channel, closed once all of theirs are.
func (x *executors) results(r *pipeline.Runner) <-chan *sched.Result {
	if len(x.list) == 1 {
		return x.list[0].Results()
	}
	out := make(chan *sched.Result)
	var fwd sync.WaitGroup
	for _, e := range x.list {
		fwd.Add(1)
		r.Go(func() error {
			defer fwd.Done()
			for sr := range e.Results() {
				out <- sr // the save workers take every result until out is closed
			}
			return nil
		})
	}
	r.Go(func() error {
		fwd.Wait()
		close(out)
		return nil
	})
	return out
}

// closeInput says no more images come to any executor.
func (x *executors) closeInput() {
	for _, e := range x.list {
		e.CloseInput()
	}
}

// wait waits until every executor finished or stopped.
func (x *executors) wait() {
	for _, e := range x.list {
		e.Wait()
	}
}

// stats are the executors' figures, in device order.
func (x *executors) stats() []sched.Stats {
	sts := make([]sched.Stats, len(x.list))
	for i, e := range x.list {
		sts[i] = e.Stats()
	}
	return sts
}

// close closes every executor, freeing its memory.
func (x *executors) close() error {
	var errs []error
	for i, e := range x.list {
		if err := e.Close(); err != nil {
			errs = append(errs, fmt.Errorf("device %s: releasing memory: %w", x.devs[i].Name(), err))
		}
	}
	return errors.Join(errs...)
}
