package gpu

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/imgpipe/imgpipe/cudastage/sched"
	"github.com/imgpipe/imgpipe/pipeline"
)

// A GPU run does not wait for its devices to open. The CUDA driver takes a few tenths of a
// second to initialise, find the device, create its context and load the kernels, which
// happens in the background (sched.Starter), and each executor then page-locks its first
// slot. Until the executors
// are up, the decode workers run inputs wholly on the CPU, with the same bits as the
// device (a small folder is mostly done before the GPU is; Summary.CPUStart counts them),
// and set aside for the device those it decodes whole (aside.go; Summary.SetAside).
// Under Options.Optional with a count of the inputs, the devices start only once the
// CPU's pace says they are worth it, which a small folder never does (deferred.go).

// Start implements pipeline.BoundBackend: it starts the executors, one per device, under the run's context (an interrupt or a
// fatal error of the run stops them, abandoning the batches on the devices), the decode
// and save workers, and the goroutines that end the run when a device fails and close done
// once every input was accounted for. The devices are started first, unless deferred.
// When every device is open, or Options.Wait, the executors start first, and an error
// means that nothing was started; otherwise they start in the background (begin).
func (b *gpuBackend) Start(r *pipeline.Runner) error {
	b.r, b.up, b.started = r, make(chan struct{}), make(chan struct{})
	drained := make(chan struct{}) // every decode worker is done
	// Only devices still to open are worth leaving unstarted (deferred.go).
	b.deferred = b.run.inputs > 0 && b.run.opening()
	if !b.deferred {
		b.startDevices()
	}
	if b.run.opening() && !b.run.wait {
		r.Go(func() error { return b.begin(drained) })
	} else if err := b.begin(drained); err != nil {
		return err
	}
	var decoders, savers sync.WaitGroup
	for i := 0; i < r.Options().Workers; i++ {
		decoders.Add(1)
		r.Go(func() error {
			defer decoders.Done()
			b.decodeWorker(&worker{Worker: pipeline.NewWorker(fmt.Sprintf("decode worker %d", i+1))})
			return nil
		})
		savers.Add(1)
		r.Go(func() error {
			defer savers.Done()
			if <-b.up; b.x != nil {
				// Save workers spread their device JPEG encoders over the devices.
				b.saveWorker(fmt.Sprintf("save worker %d", i+1), b.run.jpeg[i%len(b.run.jpeg)])
			}
			return nil
		})
	}
	r.Go(func() error {
		decoders.Wait()
		close(drained)
		if <-b.up; b.x != nil {
			b.x.closeInput() // seals the last partial batches
		}
		savers.Wait() // Results are closed: the executors finished or stopped
		if b.x != nil {
			b.x.wait()
		}
		// Inputs of batches abandoned on a device never came back: they were not done.
		b.inExec.Range(func(k, v any) bool {
			it := v.(*pipeline.Item)
			it.Drop()
			b.inExec.Delete(k)
			r.Done(it)
			return true
		})
		r.CloseDone()
		return nil
	})
	return nil
}

// begin starts the executors and the goroutines that watch them once the devices opened,
// then closes up. When the decode workers are done first (drained: the CPU did every
// input, or the run ended), it starts none and does not wait. A device that failed to open
// leaves the run on the CPU under Options.Optional, with a notice; any other failure
// cancels the run before up is closed, so that no decode worker takes the missing
// executors for devices still opening.
func (b *gpuBackend) begin(drained <-chan struct{}) error {
	defer close(b.up)
	r := b.r
	if b.deferred {
		if !b.awaitWorth(drained) {
			b.notStarted = r.Context().Err() == nil
			return nil
		}
		b.startDevices()
	}
	for _, d := range b.run.devs {
		if s, ok := d.(sched.Starter); ok {
			select {
			case <-s.Ready():
			case <-drained:
				return nil
			}
		}
	}
	// A device that does not exist is a mistake in the request, not a missing GPU.
	if err := b.run.openErr(); err != nil && b.run.optional && !errors.Is(err, sched.ErrNoSuchDevice) {
		b.noGPU = err
		if r.Options().Notice != nil {
			r.Options().Notice(fmt.Sprintf("no usable GPU (%v); running on the CPU", err))
		}
		return nil
	}
	x, err := startExecutors(r.Context(), b.run, r.Options().Trace)
	if err != nil {
		r.Cancel(err)
		return err
	}
	for _, e := range x.list {
		r.Go(func() error {
			// An executor stops by itself on a device error; it is stopped with the run's
			// cause when the run is cancelled (by another device's error too), which is not
			// a device error.
			err := e.Wait()
			if err != nil && err != context.Cause(r.Context()) {
				err = fmt.Errorf("device error: %w", err)
				r.Cancel(err)
				return err
			}
			return nil
		})
	}
	b.x, b.results = x, x.results(r)
	return nil
}

// startDevices starts the devices (sched.Start).
func (b *gpuBackend) startDevices() {
	sched.Start(b.run.devs...)
	close(b.started)
}

// onCPU reports whether the decode workers run inputs wholly on the CPU: until the
// executors are up, and for the whole run when no device opened (Options.Optional).
func (b *gpuBackend) onCPU() bool { return b.opening() || b.x == nil }

// opening reports whether the executors are not up yet.
func (b *gpuBackend) opening() bool { return !isClosed(b.up) }

// isClosed reports whether c is closed.
func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// decodeWorker decodes inputs into the executor's slots until none is left (next).
// Inputs that need no device work (failed, skipped, too large for a slot) are finished
// here, as are those that run on the CPU (onCPU); the others are finished by a save
// worker. While the devices open, inputs they would decode whole are set aside for them
// (see aside.go).
func (b *gpuBackend) decodeWorker(w *worker) {
	r := b.r
	for it := b.next(); it != nil; it = b.next() {
		if r.Ended(it) {
			it.Drop()
		} else {
			if b.onCPU() {
				aside, finished := b.setAside(it, w)
				if aside {
					continue // in the aside list now
				}
				if !finished {
					r.Process(it, w.Worker)
				}
				b.pace.done.Add(1)
				if !it.Dropped() {
					b.cpuStart.Add(1)
				}
			} else if b.toDevice(it, w) {
				continue // a save worker has it now
			}
		}
		r.Done(it)
	}
}

// Finish implements pipeline.BoundBackend: it closes the executors, freeing their memory,
// and puts their figures into the summary. Without executors the CPU did every input (before the devices opened, or
// because none did under Options.Optional), or the run failed: its error says why.
func (b *gpuBackend) Finish(sum *pipeline.Summary) error {
	if b.noGPU != nil || b.notStarted {
		sum.Device, sum.Streams, sum.Batch, sum.GPUNotStarted = "cpu", 0, 0, b.notStarted
		return nil
	}
	sum.Device, sum.Streams, sum.Batch = b.run.name(), b.run.cfg.Streams, b.run.cfg.Batch
	sum.CPUStart = int(b.cpuStart.Load())
	sum.SetAside = int(b.setAsideN.Load())
	if b.x == nil {
		return nil
	}
	sts := b.x.stats()
	b.jpegMu.Lock()
	err := errors.Join(b.x.close(), b.jpegErr)
	b.jpegMu.Unlock()
	sum.AddDeviceStats(sts)
	sum.CPUFallback = int(b.cpuFallback.Load())
	return err
}

// opening reports whether a device of the run is still opening (sched.Starter).
func (g *gpuRun) opening() bool {
	return slices.ContainsFunc(g.devs, func(d sched.Device) bool { return !sched.Opened(d) })
}

// openErr says why one of the run's devices could not open, or nil; it waits for them.
func (g *gpuRun) openErr() error {
	for _, d := range g.devs {
		if s, ok := d.(sched.Starter); ok {
			if err := s.OpenErr(); err != nil {
				return fmt.Errorf("%s: %w", d.Name(), err)
			}
		}
	}
	return nil
}
