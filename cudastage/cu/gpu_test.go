package cu_test

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/imgpipe/imgpipe/cudastage/cu"
	"github.com/imgpipe/imgpipe/cudastage/cutest"
)

//go:embed testdata/test.ptx
var testPTX []byte

// bind skips (or fails under IMGPIPE_REQUIRE_GPU=1) without a GPU, otherwise
// locks the test goroutine to its thread with the primary context current.
// Test cleanups run on the test's goroutine, which unlocks it.
func bind(t testing.TB) cu.Device {
	t.Helper()
	ord := cutest.Require(t)
	dev, err := cu.DeviceGet(ord)
	if err != nil {
		t.Fatal(err)
	}
	ctx, err := dev.PrimaryCtxRetain()
	if err != nil {
		t.Fatal(err)
	}
	runtime.LockOSThread()
	if err := ctx.SetCurrent(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		runtime.UnlockOSThread()
		if err := dev.PrimaryCtxRelease(); err != nil {
			t.Error(err)
		}
	})
	return dev
}

func randomBytes(n int, seed uint64) []byte {
	rng := rand.New(rand.NewPCG(seed, 7))
	b := make([]byte, n)
	for i := 0; i+8 <= n; i += 8 {
		binary.LittleEndian.PutUint64(b[i:], rng.Uint64())
	}
	for i := n &^ 7; i < n; i++ {
		b[i] = byte(rng.Uint32())
	}
	return b
}

// result carries a call's two results to ok, which fails the test on error:
// must(f()).ok(t).
type result[T any] struct {
	v   T
	err error
}

func must[T any](v T, err error) result[T] { return result[T]{v, err} }

func (r result[T]) ok(t testing.TB) T {
	t.Helper()
	if r.err != nil {
		t.Fatal(r.err)
	}
	return r.v
}

func TestGPUDeviceQueries(t *testing.T) {
	dev := bind(t)
	name := must(dev.Name()).ok(t)
	major, minor, err := dev.ComputeCapability()
	if err != nil {
		t.Fatal(err)
	}
	sms := must(dev.Attribute(cu.MultiprocessorCount)).ok(t)
	mem := must(dev.TotalMem()).ok(t)
	free, total, err := cu.MemGetInfo()
	if err != nil {
		t.Fatal(err)
	}
	v := must(cu.DriverVersion()).ok(t)
	t.Logf("%s: compute %d.%d, %d SMs, %.1f GiB (%.1f GiB free), CUDA %s", name, major, minor, sms, float64(mem)/(1<<30), float64(free)/(1<<30), cu.VersionString(v))
	if name == "" || major < 5 || sms < 1 || mem < 1<<30 || total != mem || free > total || v < cu.MinDriverVersion {
		t.Errorf("implausible device figures")
	}
}

func TestGPUAllocFree(t *testing.T) {
	bind(t)
	free0, _, _ := cu.MemGetInfo()
	p := must(cu.MemAlloc(256 << 20)).ok(t)
	if p == 0 {
		t.Fatal("null device pointer")
	}
	free1, _, _ := cu.MemGetInfo()
	if free0-free1 < 200<<20 {
		t.Errorf("free memory dropped by %d bytes after a 256 MiB allocation", free0-free1)
	}
	if err := cu.MemFree(p); err != nil {
		t.Fatal(err)
	}
}

func TestGPUImpossibleAllocation(t *testing.T) {
	bind(t)
	_, err := cu.MemAlloc(1 << 50)
	if !cu.IsOutOfMemory(err) || cu.IsSticky(err) {
		t.Fatalf("MemAlloc(1<<50) = %v, want a non-sticky out-of-memory error", err)
	}
	if !strings.HasPrefix(err.Error(), "cuMemAlloc: CUDA_ERROR_OUT_OF_MEMORY: ") {
		t.Errorf("error text %q", err)
	}
	if _, err := cu.MemHostAlloc(1 << 50); err == nil {
		t.Error("MemHostAlloc(1<<50) succeeded")
	}
	// The context is still usable.
	p := must(cu.MemAlloc(1 << 20)).ok(t)
	if err := cu.MemFree(p); err != nil {
		t.Fatal(err)
	}
}

func TestGPUPinnedRoundTrip(t *testing.T) {
	bind(t)
	s := must(cu.StreamCreate(true)).ok(t)
	defer s.Destroy()
	for _, n := range []int{1, 4097, 1_000_003, 64 << 20} {
		src := randomBytes(n, uint64(n))
		h := must(cu.MemHostAlloc(n)).ok(t)
		out := must(cu.MemHostAlloc(n)).ok(t)
		copy(h, src)
		clear(out)
		a := must(cu.MemAlloc(uint64(n))).ok(t)
		b := must(cu.MemAlloc(uint64(n))).ok(t)
		steps := []error{
			cu.MemsetD8Async(b, 0xa5, uint64(n), s), // poison: an unwritten byte fails
			cu.MemcpyHtoDAsync(a, h, s),
			cu.MemcpyDtoDAsync(b, a, uint64(n), s),
			cu.MemcpyDtoHAsync(out, b, s),
			s.Synchronize(),
		}
		if err := errors.Join(steps...); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(out, src) {
			t.Errorf("%d bytes: pinned H2D/D2D/D2H round trip changed the data", n)
		}
		// Synchronous copies with Go memory.
		back := make([]byte, n)
		if err := cu.MemcpyHtoD(a, src); err != nil {
			t.Fatal(err)
		}
		if err := cu.MemcpyDtoH(back, a); err != nil || !bytes.Equal(back, src) {
			t.Errorf("%d bytes: synchronous round trip: %v", n, err)
		}
		if err := errors.Join(cu.MemFree(a), cu.MemFree(b), cu.MemFreeHost(h), cu.MemFreeHost(out)); err != nil {
			t.Fatal(err)
		}
	}
}

func TestGPUAsyncRefusesGoMemory(t *testing.T) {
	bind(t)
	p := must(cu.MemAlloc(4096)).ok(t)
	defer cu.MemFree(p)
	goMem := make([]byte, 4096)
	if err := cu.MemcpyHtoDAsync(p, goMem, 0); err == nil {
		t.Error("async H2D from Go memory accepted")
	}
	if err := cu.MemcpyDtoHAsync(goMem, p, 0); err == nil {
		t.Error("async D2H into Go memory accepted")
	}
}

func TestGPUEvents(t *testing.T) {
	bind(t)
	s := must(cu.StreamCreate(true)).ok(t)
	defer s.Destroy()
	start, end := must(cu.EventCreate(true)).ok(t), must(cu.EventCreate(true)).ok(t)
	defer start.Destroy()
	defer end.Destroy()
	const n = 256 << 20
	a, b := must(cu.MemAlloc(n)).ok(t), must(cu.MemAlloc(n)).ok(t)
	defer cu.MemFree(a)
	defer cu.MemFree(b)
	if err := errors.Join(start.Record(s), cu.MemcpyDtoDAsync(b, a, n, s), end.Record(s), end.Synchronize()); err != nil {
		t.Fatal(err)
	}
	if done, err := end.Query(); !done || err != nil {
		t.Errorf("Query after Synchronize = %v, %v", done, err)
	}
	ms := must(cu.ElapsedTime(start, end)).ok(t)
	t.Logf("DtoD copy of 256 MiB: %.3f ms (%.0f GB/s read+write)", ms, 2*n/float64(ms)/1e6)
	if ms <= 0 || ms > 10_000 {
		t.Errorf("elapsed %v ms is implausible", ms)
	}
	// Cross-stream ordering through an event.
	s2 := must(cu.StreamCreate(true)).ok(t)
	defer s2.Destroy()
	ev := must(cu.EventCreate(false)).ok(t)
	defer ev.Destroy()
	if err := errors.Join(ev.Record(s), s2.WaitEvent(ev), s2.Synchronize()); err != nil {
		t.Fatal(err)
	}
	if _, err := cu.ElapsedTime(ev, ev); err == nil {
		t.Error("ElapsedTime on an event without timing succeeded")
	}
}

func TestGPULaunch(t *testing.T) {
	bind(t)
	m := must(cu.ModuleLoadData(testPTX)).ok(t)
	defer m.Unload()
	f := must(m.Function("add_u32")).ok(t)
	if mt := must(f.Attribute(cu.FuncMaxThreadsPerBlock)).ok(t); mt < 256 {
		t.Errorf("max threads per block %d", mt)
	}
	const n = 1_000_003
	src := randomBytes(4*n, 3)
	in, out := must(cu.MemAlloc(4*n)).ok(t), must(cu.MemAlloc(4*n)).ok(t)
	defer cu.MemFree(in)
	defer cu.MemFree(out)
	if err := cu.MemcpyHtoD(in, src); err != nil {
		t.Fatal(err)
	}
	k, count := uint32(0x01020304), uint32(n)
	grid := [3]uint32{(n + 255) / 256, 1, 1}
	if err := cu.LaunchKernel(f, grid, [3]uint32{256, 1, 1}, 0, 0, &out, &in, &k, &count); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 4*n)
	if err := cu.MemcpyDtoH(got, out); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		want := binary.LittleEndian.Uint32(src[4*i:]) + k
		if g := binary.LittleEndian.Uint32(got[4*i:]); g != want {
			t.Fatalf("out[%d] = %#x, want %#x", i, g, want)
		}
	}

	// Invalid launches are Go errors, not sticky: the context goes on working.
	err := cu.LaunchKernel(f, grid, [3]uint32{4096, 1, 1}, 0, 0, &out, &in, &k, &count)
	if err == nil || cu.IsSticky(err) {
		t.Errorf("4096-thread block = %v, want a non-sticky error", err)
	}
	err = cu.LaunchKernel(f, grid, [3]uint32{256, 1, 1}, 1<<30, 0, &out, &in, &k, &count)
	if err == nil || cu.IsSticky(err) {
		t.Errorf("1 GiB of shared memory = %v, want a non-sticky error", err)
	}
	if err := cu.LaunchKernel(0, grid, [3]uint32{256, 1, 1}, 0, 0); err == nil || cu.IsSticky(err) {
		t.Errorf("nil function = %v", err)
	}
	if _, err := m.Function("no_such_kernel"); !cu.HasCode(err, cu.ErrorNotFound) {
		t.Errorf("missing kernel = %v", err)
	}
	if err := cu.LaunchKernel(f, [3]uint32{1, 1, 1}, [3]uint32{1, 1, 1}, 0, 0, &out, &in, &k, &count); err != nil {
		t.Fatal(err)
	}
	if err := cu.CtxSynchronize(); err != nil {
		t.Fatalf("context broken after invalid launches: %v", err)
	}
}

func TestGPUBadPTX(t *testing.T) {
	bind(t)
	_, err := cu.ModuleLoadData([]byte(".version 7.0\n.target sm_75\n.address_size 64\n.visible .entry k() { bogus; }\n"))
	if err == nil || cu.IsSticky(err) {
		t.Fatalf("bad PTX = %v, want a non-sticky error", err)
	}
	t.Logf("bad PTX: %v", err)
}

// TestGPUStickyError provokes an illegal address in a child process (a sticky
// error ruins the context for the rest of the process) and checks that it is
// reported as sticky, that later calls fail fast too, and that nothing hangs.
func TestGPUStickyError(t *testing.T) {
	if os.Getenv("CU_STICKY_CHILD") == "1" {
		stickyChild(t)
		return
	}
	bind(t)
	exe := must(os.Executable()).ok(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, exe, "-test.run=^TestGPUStickyError$", "-test.v")
	cmd.Env = append(os.Environ(), "CU_STICKY_CHILD=1", cutest.EnvRequire+"=1")
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("the child hung after an illegal address:\n%s", out)
	}
	if err != nil {
		t.Fatalf("child failed: %v\n%s", err, out)
	}
	t.Logf("child:\n%s", out)
}

func stickyChild(t *testing.T) {
	// Set up by hand rather than with bind: releasing a broken context at
	// cleanup may fail, and the process ends right after anyway.
	dev := must(cu.DeviceGet(cutest.Require(t))).ok(t)
	ctx := must(dev.PrimaryCtxRetain()).ok(t)
	runtime.LockOSThread()
	if err := ctx.SetCurrent(); err != nil {
		t.Fatal(err)
	}
	m := must(cu.ModuleLoadData(testPTX)).ok(t)
	f := must(m.Function("store_at")).ok(t)
	s := must(cu.StreamCreate(true)).ok(t)
	bad := cu.DevicePtr(16) // unmapped
	if err := cu.LaunchKernel(f, [3]uint32{1, 1, 1}, [3]uint32{1, 1, 1}, 0, s, &bad); err != nil {
		t.Fatalf("launch: %v", err) // the fault is asynchronous: the launch itself succeeds
	}
	err := s.Synchronize()
	t.Logf("Synchronize after the faulting kernel: %v (sticky %v)", err, cu.IsSticky(err))
	if !cu.IsSticky(err) { // normally CUDA_ERROR_ILLEGAL_ADDRESS
		t.Fatalf("want a sticky error (illegal address), got %v", err)
	}
	// The context stays broken: later calls fail (fast), they do not hang.
	err = cu.CtxSynchronize()
	t.Logf("CtxSynchronize afterwards: %v", err)
	if !cu.IsSticky(err) {
		t.Errorf("CtxSynchronize after a sticky error = %v, want it sticky again", err)
	}
	if _, err := cu.MemAlloc(1 << 20); err == nil {
		t.Error("MemAlloc succeeded on a broken context")
	} else {
		t.Logf("MemAlloc afterwards: %v", err)
	}
}

// copyBandwidth measures one kind of copy of n bytes, reps times after a
// warm-up, with events, and returns the median GB/s (1e9 bytes/s).
func copyBandwidth(t testing.TB, kind string, n, reps int) float64 {
	t.Helper()
	s1, s2 := must(cu.StreamCreate(true)).ok(t), must(cu.StreamCreate(true)).ok(t)
	defer s1.Destroy()
	defer s2.Destroy()
	h1, h2 := must(cu.MemHostAlloc(n)).ok(t), must(cu.MemHostAlloc(n)).ok(t)
	defer cu.MemFreeHost(h1)
	defer cu.MemFreeHost(h2)
	copy(h1, randomBytes(n, 11))
	copy(h2, randomBytes(n, 12))
	pageable := randomBytes(n, 13)
	d1, d2 := must(cu.MemAlloc(uint64(n))).ok(t), must(cu.MemAlloc(uint64(n))).ok(t)
	defer cu.MemFree(d1)
	defer cu.MemFree(d2)
	start, mid, end := must(cu.EventCreate(true)).ok(t), must(cu.EventCreate(true)).ok(t), must(cu.EventCreate(true)).ok(t)
	defer start.Destroy()
	defer mid.Destroy()
	defer end.Destroy()

	bytesMoved := float64(n)
	one := func() float64 {
		var err error
		switch kind {
		case "H2D":
			err = errors.Join(start.Record(s1), cu.MemcpyHtoDAsync(d1, h1, s1), end.Record(s1), end.Synchronize())
		case "D2H":
			err = errors.Join(start.Record(s1), cu.MemcpyDtoHAsync(h1, d1, s1), end.Record(s1), end.Synchronize())
		case "H2D+D2H":
			// Both directions at once on two streams, timed from a common start.
			bytesMoved = 2 * float64(n)
			err = errors.Join(start.Record(s1), s2.WaitEvent(start),
				cu.MemcpyHtoDAsync(d1, h1, s1), cu.MemcpyDtoHAsync(h2, d2, s2),
				mid.Record(s2), s1.WaitEvent(mid), end.Record(s1), end.Synchronize())
		case "pageable-H2D":
			err = errors.Join(start.Record(0), cu.MemcpyHtoD(d1, pageable), end.Record(0), end.Synchronize())
		default:
			t.Fatalf("unknown copy kind %q", kind)
		}
		if err != nil {
			t.Fatal(err)
		}
		ms := must(cu.ElapsedTime(start, end)).ok(t)
		return bytesMoved / (float64(ms) * 1e6)
	}
	for range 3 {
		one()
	}
	var gbs []float64
	for range reps {
		gbs = append(gbs, one())
	}
	slices.Sort(gbs)
	return gbs[len(gbs)/2]
}

// TestGPUPinnedBandwidth logs the copy bandwidths (it asserts only that
// pinned copies beat pageable ones, the reason the pool exists).
func TestGPUPinnedBandwidth(t *testing.T) {
	bind(t)
	const n = 64 << 20
	res := map[string]float64{}
	for _, kind := range []string{"H2D", "D2H", "H2D+D2H", "pageable-H2D"} {
		res[kind] = copyBandwidth(t, kind, n, 15)
		t.Logf("%-13s %6.1f GB/s (64 MiB, median of 15 after warm-up, CUDA events)", kind, res[kind])
	}
	if res["H2D"] <= res["pageable-H2D"] {
		t.Errorf("pinned H2D %.1f GB/s is not faster than pageable %.1f GB/s", res["H2D"], res["pageable-H2D"])
	}
}

func BenchmarkGPUCopy(b *testing.B) {
	bind(b)
	const n = 64 << 20
	for _, kind := range []string{"H2D", "D2H", "H2D+D2H", "pageable-H2D"} {
		b.Run(kind, func(b *testing.B) {
			// Sub-benchmarks run on their own goroutine: bind it too.
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			dev := must(cu.DeviceGet(cutest.Require(b))).ok(b)
			ctx := must(dev.PrimaryCtxRetain()).ok(b)
			defer dev.PrimaryCtxRelease()
			if err := ctx.SetCurrent(); err != nil {
				b.Fatal(err)
			}
			var gbs float64
			for b.Loop() {
				gbs = copyBandwidth(b, kind, n, 5)
			}
			b.ReportMetric(gbs, "GB/s")
		})
	}
}

// TestGPUConcurrentStreams drives copies and launches from several locked
// goroutines at once, each with its own stream.
func TestGPUConcurrentStreams(t *testing.T) {
	dev := bind(t)
	m := must(cu.ModuleLoadData(testPTX)).ok(t)
	defer m.Unload()
	f := must(m.Function("add_u32")).ok(t)
	ctx := must(dev.PrimaryCtxRetain()).ok(t)
	defer dev.PrimaryCtxRelease()
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			errs <- func() error {
				if err := ctx.SetCurrent(); err != nil {
					return err
				}
				s, err := cu.StreamCreate(true)
				if err != nil {
					return err
				}
				defer s.Destroy()
				const n = 1 << 20
				h, err := cu.MemHostAlloc(4 * n)
				if err != nil {
					return err
				}
				defer cu.MemFreeHost(h)
				d, err := cu.MemAlloc(4 * n)
				if err != nil {
					return err
				}
				defer cu.MemFree(d)
				for it := range 20 {
					src := randomBytes(4*n, uint64(g*100+it))
					copy(h, src)
					k, count := uint32(g+it), uint32(n)
					if err := errors.Join(cu.MemcpyHtoDAsync(d, h, s),
						cu.LaunchKernel(f, [3]uint32{n / 256, 1, 1}, [3]uint32{256, 1, 1}, 0, s, &d, &d, &k, &count),
						cu.MemcpyDtoHAsync(h, d, s), s.Synchronize()); err != nil {
						return err
					}
					for i := 0; i < n; i += 4099 {
						want := binary.LittleEndian.Uint32(src[4*i:]) + k
						if got := binary.LittleEndian.Uint32(h[4*i:]); got != want {
							return fmt.Errorf("goroutine %d iteration %d: out[%d] = %#x, want %#x", g, it, i, got, want)
						}
					}
				}
				return nil
			}()
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
}
