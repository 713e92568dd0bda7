package cudastage

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/imgpipe/imgpipe/cudastage/cu"
	"github.com/imgpipe/imgpipe/cudastage/cutest"
	"github.com/imgpipe/imgpipe/cudastage/sched"
	"github.com/imgpipe/imgpipe/memory/devmem"
	"github.com/imgpipe/imgpipe/memory/pinned"
)

// requireGPU opens the test GPU, or skips (fails under IMGPIPE_REQUIRE_GPU=1)
// when there is none. The GPU is closed when the test ends. For this
// package's tests (kernels and executor tests too).
func requireGPU(t testing.TB) *GPU {
	t.Helper()
	g, err := OpenGPU(cutest.Require(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := g.Close(); err != nil {
			t.Error(err)
		}
	})
	return g
}

// TestFaultTracking needs no GPU: a GPU value whose Check saw a sticky error
// refuses further work without touching the driver.
func TestFaultTracking(t *testing.T) {
	g := &GPU{ordinal: 3}
	if err := g.Err(); err != nil {
		t.Fatalf("fresh GPU: Err = %v", err)
	}
	plain := &cu.Error{Call: "cuLaunchKernel", Code: cu.ErrorInvalidValue}
	if got := g.Check(plain); got != plain || g.Err() != nil {
		t.Fatalf("a non-sticky error marked the GPU faulty: %v", g.Err())
	}
	sticky := &cu.Error{Call: "cuStreamSynchronize", Code: cu.ErrorIllegalAddress, Name: "CUDA_ERROR_ILLEGAL_ADDRESS"}
	wrapped := fmt.Errorf("batch 7: %w", sticky)
	if got := g.Check(wrapped); got != wrapped {
		t.Fatalf("Check changed the error: %v", got)
	}
	g.Check(&cu.Error{Call: "later", Code: cu.ErrorLaunchFailed}) // the first fault is kept
	err := g.Err()
	if !cu.IsSticky(err) || !errors.Is(err, sticky) || err.Error() != "GPU 3 unusable after a device fault: batch 7: cuStreamSynchronize: CUDA_ERROR_ILLEGAL_ADDRESS" {
		t.Errorf("Err = %v", err)
	}
	ran := false
	if err := g.Do(func() error { ran = true; return nil }); !cu.IsSticky(err) || ran {
		t.Errorf("Do on a faulted GPU = %v (ran %v), want the fault without running", err, ran)
	}
	if _, err := g.Bind(); !cu.IsSticky(err) {
		t.Errorf("Bind on a faulted GPU = %v", err)
	}
	closed := &GPU{closed: true}
	if err := closed.Do(func() error { return nil }); !errors.Is(err, ErrClosed) {
		t.Errorf("Do after Close = %v", err)
	}
}

// Open returns a device not started yet. Closed before it started, it never opens: its
// calls fail with ErrClosed. Started and closed at once, Close waits for the opening and
// releases everything; opened, it is named by its model and usable.
func TestOpenInBackground(t *testing.T) {
	ordinal := cutest.Require(t)
	for _, use := range []string{"never started", "started", "used"} {
		d, closeDev, err := Open(ordinal)
		if err != nil {
			t.Fatal(err)
		}
		switch use {
		case "started":
			d.Start()
		case "used":
			if err := d.OpenErr(); err != nil {
				t.Fatal(err)
			}
			if name := d.Name(); name != fmt.Sprintf("GPU %d (%s)", ordinal, d.GPU().Name()) || d.GPU().Name() == "" {
				t.Errorf("Name = %q", name)
			}
			if err := d.GPU().Do(func() error { _, _, err := cu.MemGetInfo(); return err }); err != nil {
				t.Error(err)
			}
		}
		if err := closeDev(); err != nil {
			t.Errorf("close (%s): %v", use, err)
		}
		select {
		case <-d.Ready():
		default:
			t.Errorf("closed (%s) before Ready", use)
		}
		if use == "never started" {
			if err := d.OpenErr(); !errors.Is(err, ErrClosed) || d.GPU().Name() != "" || d.Name() != fmt.Sprintf("GPU %d", ordinal) {
				t.Errorf("closed before it started: OpenErr %v, named %q and %q; want ErrClosed, no model", err, d.GPU().Name(), d.Name())
			}
		}
	}
}

func TestOpenGPUWithoutGPU(t *testing.T) {
	if cu.Load() == nil {
		if openErr(1<<20) == nil {
			t.Error("OpenGPU(huge ordinal) succeeded")
		}
		return
	}
	err := openErr(0)
	if !errors.Is(err, cu.ErrNoDriver) && !errors.Is(err, cu.ErrNoDevice) && !errors.Is(err, cu.ErrDriverTooOld) {
		t.Errorf("OpenGPU without a GPU = %v, want the reason", err)
	}
}

func TestGPUDoAndBind(t *testing.T) {
	g := requireGPU(t)
	var p cu.DevicePtr
	if err := g.Do(func() error {
		var err error
		p, err = cu.MemAlloc(1 << 20)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	// Nested Do and a different goroutine both see the context.
	done := make(chan error)
	go func() {
		done <- g.Do(func() error {
			return g.Do(func() error { return cu.MemFree(p) })
		})
	}()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	release, err := g.Bind()
	if err != nil {
		t.Fatal(err)
	}
	c, err := cu.CurrentContext()
	release()
	if err != nil || c != g.Context() {
		t.Errorf("bound goroutine's current context = %#x, %v, want %#x", c, err, g.Context())
	}
	// Non-sticky errors pass through and leave the GPU usable.
	if err := g.Do(func() error { _, err := cu.MemAlloc(1 << 50); return err }); !cu.IsOutOfMemory(err) {
		t.Errorf("impossible allocation through Do = %v", err)
	}
	if g.Err() != nil {
		t.Errorf("GPU marked faulty by an OOM: %v", g.Err())
	}
}

func TestGPUPoolsConcurrent(t *testing.T) {
	g := requireGPU(t)
	const (
		workers = 6
		iters   = 40
		maxN    = 8 << 20
	)
	d := NewDevice(g)
	defer d.Close()
	host, err := pinned.New(int64(workers*2*pinned.ClassSize(maxN)), sched.HostAllocator(d))
	if err != nil {
		t.Fatal(err)
	}
	dev, err := devmem.New(sched.DeviceDriver(d), 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- g.Do(func() error { return poolWorker(host, dev, w, iters, maxN) })
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	hs, ds := host.Stats(), dev.Stats()
	t.Logf("pinned: %s", hs)
	t.Logf("device: %s; %d hits, %d misses, %d driver allocs", ds, ds.Hits, ds.Misses, ds.DriverAllocs)
	if hs.InUse != 0 || ds.Allocated != 0 || hs.Reserved > hs.Budget || ds.PeakReserved > ds.Budget {
		t.Errorf("leak or budget exceeded: pinned %+v, device %+v", hs, ds)
	}
	if ds.Hits == 0 || hs.Hits == 0 {
		t.Error("no reuse at all")
	}
	if err := errors.Join(host.Close(), dev.Close()); err != nil {
		t.Fatal(err)
	}
}

func poolWorker(host *pinned.Pool, dev *devmem.Allocator, w, iters, maxN int) error {
	s, err := cu.StreamCreate(true)
	if err != nil {
		return err
	}
	defer s.Destroy()
	rng := rand.New(rand.NewPCG(uint64(w), 5))
	ctx := context.Background()
	for it := range iters {
		n := maxN/2 + rng.IntN(maxN/2)
		in, err := host.Get(ctx, n)
		if err != nil {
			return err
		}
		out, err := host.Get(ctx, n)
		if err != nil {
			return err
		}
		src := in.Bytes()
		for i := 0; i+8 <= n; i += 8 {
			binary.LittleEndian.PutUint64(src[i:], rng.Uint64())
		}
		a, err := dev.Alloc(uint64(n), devmem.Stream(s))
		if err != nil {
			return err
		}
		b, err := dev.Alloc(uint64(n), devmem.Stream(s))
		if err != nil {
			return err
		}
		if err := errors.Join(
			cu.MemsetD8Async(cu.DevicePtr(b.Ptr), 0xee, uint64(n), s),
			cu.MemcpyHtoDAsync(cu.DevicePtr(a.Ptr), src, s),
			cu.MemcpyDtoDAsync(cu.DevicePtr(b.Ptr), cu.DevicePtr(a.Ptr), uint64(n), s),
			cu.MemcpyDtoHAsync(out.Bytes(), cu.DevicePtr(b.Ptr), s),
		); err != nil {
			return err
		}
		// Stream order makes freeing before the copies finish safe: the
		// blocks are reused only by later work on this stream.
		if err := errors.Join(dev.Free(a), dev.Free(b)); err != nil {
			return err
		}
		if err := s.Synchronize(); err != nil {
			return err
		}
		if !bytes.Equal(out.Bytes(), src) {
			return fmt.Errorf("worker %d iteration %d: round trip of %d bytes changed the data", w, it, n)
		}
		if err := errors.Join(host.Put(in), host.Put(out)); err != nil {
			return err
		}
	}
	return nil
}
