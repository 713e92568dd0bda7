package devmem

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"

	"github.com/imgpipe/imgpipe/cudastage/cu"
)

// fakeDriver hands out fake device addresses, tracks what is live, and can be
// told to run out of memory or fail.
type fakeDriver struct {
	mu       sync.Mutex
	next     Ptr
	live     map[Ptr]uint64
	liveSize uint64
	peak     uint64
	capacity uint64 // driver OOM above this (0: unlimited)
	failWith error  // next MemAlloc returns this
	allocs   int
	frees    int
	err      error // first misuse seen
}

func newFakeDriver(capacity uint64) *fakeDriver {
	return &fakeDriver{next: 1 << 32, live: map[Ptr]uint64{}, capacity: capacity}
}

var errDriverOOM = &cu.Error{Call: "cuMemAlloc", Code: cu.ErrorOutOfMemory, Name: "CUDA_ERROR_OUT_OF_MEMORY", Msg: "out of memory"}

func (f *fakeDriver) MemAlloc(n uint64) (Ptr, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failWith != nil {
		err := f.failWith
		f.failWith = nil
		return 0, err
	}
	if f.capacity > 0 && f.liveSize+n > f.capacity {
		return 0, errDriverOOM
	}
	p := f.next
	f.next += Ptr(n + 4096)
	f.live[p] = n
	f.liveSize += n
	f.peak = max(f.peak, f.liveSize)
	f.allocs++
	return p, nil
}

func (f *fakeDriver) MemFree(p Ptr) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	n, ok := f.live[p]
	if !ok {
		f.err = fmt.Errorf("free of unknown or freed pointer %#x", p)
		return f.err
	}
	delete(f.live, p)
	f.liveSize -= n
	f.frees++
	return nil
}

// IsOutOfMemory implements Driver with the CUDA driver's rule, as the fake
// fails with CUDA's errors.
func (f *fakeDriver) IsOutOfMemory(err error) bool { return cu.IsOutOfMemory(err) }

func (f *fakeDriver) state() (live, peak uint64, allocs, frees int, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.liveSize, f.peak, f.allocs, f.frees, f.err
}

const MiB = 1 << 20

func TestRoundSize(t *testing.T) {
	for _, tc := range []struct{ n, want uint64 }{
		{1, 512}, {512, 512}, {513, 1024}, {4000, 4096}, {1 << 20, 1 << 20},
		{1<<20 + 1, 2 * MiB}, {2 * MiB, 2 * MiB}, {2*MiB + 1, 4 * MiB},
		{16 * 1920 * 1080 * 3, 96 * MiB}, // a batch of 16 RGB 1080p images: 99.5 MB
	} {
		if got := RoundSize(tc.n); got != tc.want {
			t.Errorf("RoundSize(%d) = %d, want %d", tc.n, got, tc.want)
		}
	}
}

func TestNewErrors(t *testing.T) {
	if _, err := New(nil, MiB); err == nil {
		t.Error("nil driver: want error")
	}
	if _, err := New(newFakeDriver(0), 100); err == nil {
		t.Error("tiny budget: want error")
	}
	a, _ := New(newFakeDriver(0), MiB)
	if _, err := a.Alloc(0, 0); err == nil {
		t.Error("Alloc(0): want error")
	}
}

func TestSteadyStateNoDriverCalls(t *testing.T) {
	f := newFakeDriver(0)
	a, _ := New(f, 1<<30)
	const s = Stream(7)
	for i := range 100 {
		// A batch: input, intermediate, output, sizes varying a little
		// from batch to batch as images do.
		in, err := a.Alloc(uint64(95*MiB+i*1000), s)
		if err != nil {
			t.Fatal(err)
		}
		tmp, _ := a.Alloc(uint64(63*MiB+i*1000), s)
		out, _ := a.Alloc(uint64(31*MiB+i*1000), s)
		for _, b := range []*Block{tmp, out, in} {
			if err := a.Free(b); err != nil {
				t.Fatal(err)
			}
		}
	}
	_, _, allocs, frees, _ := f.state()
	st := a.Stats()
	if allocs != 3 || frees != 0 || st.Hits != 297 || st.Misses != 3 {
		t.Errorf("%d driver allocs, %d frees, stats %+v: want 3 allocs and all other requests from the cache", allocs, frees, st)
	}
	if st.Allocated != 0 || st.Reserved != (96+64+32)*MiB || st.PeakAllocated != st.Reserved {
		t.Errorf("stats %+v", st)
	}
}

func TestBestFitAndTolerance(t *testing.T) {
	f := newFakeDriver(0)
	a, _ := New(f, 1<<30)
	big, _ := a.Alloc(16*MiB, 1)
	mid, _ := a.Alloc(10*MiB, 1)
	_ = a.Free(big)
	_ = a.Free(mid)
	// 9 MiB (rounds to 10) takes the 10 MiB block, not the 16.
	b, _ := a.Alloc(9*MiB, 1)
	if b.Ptr != mid.Ptr || b.Size != 10*MiB || b.Len() != 9*MiB {
		t.Errorf("got block %#x size %d, want the 10 MiB block %#x", b.Ptr, b.Size, mid.Ptr)
	}
	// 4 MiB must not take the 16 MiB block (more than 25% larger).
	c, _ := a.Alloc(4*MiB, 1)
	if c.Ptr == big.Ptr {
		t.Error("4 MiB request took a 16 MiB block")
	}
	// 14 MiB may take it (16 ≤ 14 + 14/4).
	d, _ := a.Alloc(14*MiB, 1)
	if d.Ptr != big.Ptr {
		t.Error("14 MiB request did not reuse the cached 16 MiB block")
	}
}

func TestStreamsDoNotShareCachedBlocks(t *testing.T) {
	a, _ := New(newFakeDriver(0), 1<<30)
	b1, _ := a.Alloc(MiB, 1)
	_ = a.Free(b1)
	b2, _ := a.Alloc(MiB, 2)
	if b2.Ptr == b1.Ptr {
		t.Error("a block freed on stream 1 was reused on stream 2")
	}
	if b2.Stream() != 2 {
		t.Errorf("Stream() = %d", b2.Stream())
	}
	b3, _ := a.Alloc(MiB, 1)
	if b3.Ptr != b1.Ptr {
		t.Error("a block freed on stream 1 was not reused on stream 1")
	}
}

func TestBudgetOOM(t *testing.T) {
	f := newFakeDriver(0)
	a, _ := New(f, 10*MiB)
	b, err := a.Alloc(8*MiB, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, err = a.Alloc(4*MiB, 0)
	var oom *OOMError
	if !errors.As(err, &oom) || !errors.Is(err, ErrOutOfMemory) {
		t.Fatalf("got %v, want an *OOMError", err)
	}
	if oom.Stats.Allocated != 8*MiB || oom.Stats.Reserved != 8*MiB || oom.Stats.Budget != 10*MiB || oom.Err != nil {
		t.Errorf("figures %+v", oom)
	}
	for _, want := range []string{"4.0 MiB requested", "allocated 8.0 MiB", "reserved 8.0 MiB", "budget 10.0 MiB", "over the budget"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	// Larger than the whole budget: refused without a driver call.
	_, _, before, _, _ := f.state()
	if _, err := a.Alloc(11*MiB, 0); !errors.Is(err, ErrOutOfMemory) {
		t.Errorf("over-budget request: %v", err)
	}
	if _, _, after, _, _ := f.state(); after != before {
		t.Error("over-budget request reached the driver")
	}
	if st := a.Stats(); st.OOMs != 2 || st.Allocated != 8*MiB {
		t.Errorf("stats %+v", st)
	}
	_ = a.Free(b)
}

func TestCacheReleasedToMakeRoom(t *testing.T) {
	f := newFakeDriver(0)
	a, _ := New(f, 10*MiB)
	x, _ := a.Alloc(4*MiB, 1)
	y, _ := a.Alloc(4*MiB, 2)
	_ = a.Free(x)
	_ = a.Free(y)
	// 8 MiB cached on streams 1 and 2; 6 MiB on stream 3 needs 4 MiB of
	// room: one cached block goes, the other stays.
	z, err := a.Alloc(6*MiB, 3)
	if err != nil {
		t.Fatal(err)
	}
	live, peak, _, frees, ferr := f.state()
	st := a.Stats()
	if ferr != nil || frees != 1 || live != 10*MiB || peak > 10*MiB || st.Reserved != 10*MiB || st.CachedBlocks != 1 || st.Blocks != 2 {
		t.Errorf("live %d peak %d frees %d err %v stats %+v", live, peak, frees, ferr, st)
	}
	_ = a.Free(z)
}

func TestDriverOOMReleasesCacheAndRetries(t *testing.T) {
	f := newFakeDriver(12 * MiB) // the device has less than the budget
	a, _ := New(f, 100*MiB)
	x, _ := a.Alloc(8*MiB, 1)
	_ = a.Free(x)
	y, err := a.Alloc(8*MiB, 2) // needs the 8 MiB cached for stream 1
	if err != nil {
		t.Fatalf("retry after releasing the cache failed: %v", err)
	}
	// Nothing left to release: the driver's OOM comes back with figures.
	_, err = a.Alloc(8*MiB, 2)
	var oom *OOMError
	if !errors.As(err, &oom) || !cu.IsOutOfMemory(err) || !errors.Is(err, ErrOutOfMemory) {
		t.Fatalf("got %v, want an *OOMError wrapping the driver's error", err)
	}
	for _, want := range []string{"allocated 8.0 MiB", "reserved 8.0 MiB", "cuMemAlloc: CUDA_ERROR_OUT_OF_MEMORY: out of memory"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if st := a.Stats(); st.Reserved != 8*MiB || st.Blocks != 1 {
		t.Errorf("reservation not undone: %+v", st)
	}
	_ = a.Free(y)
}

func TestDriverFailure(t *testing.T) {
	f := newFakeDriver(0)
	a, _ := New(f, 100*MiB)
	f.failWith = &cu.Error{Call: "cuMemAlloc", Code: cu.ErrorIllegalAddress, Name: "CUDA_ERROR_ILLEGAL_ADDRESS"}
	_, err := a.Alloc(MiB, 0)
	if err == nil || !cu.IsSticky(err) || errors.Is(err, ErrOutOfMemory) {
		t.Fatalf("got %v, want the sticky driver error, not an OOM", err)
	}
	if st := a.Stats(); st.Reserved != 0 || st.Blocks != 0 || st.Allocated != 0 {
		t.Errorf("stats after failure: %+v", st)
	}
}

func TestDoubleFreePanics(t *testing.T) {
	a, _ := New(newFakeDriver(0), 100*MiB)
	other, _ := New(newFakeDriver(0), 100*MiB)
	b, _ := a.Alloc(MiB, 0)
	for name, f := range map[string]func(){
		"free to another allocator": func() { _ = other.Free(b) },
		"nil":                       func() { _ = a.Free(nil) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s did not panic", name)
				}
			}()
			f()
		}()
	}
	_ = a.Free(b)
	defer func() {
		if recover() == nil {
			t.Error("double free did not panic")
		}
	}()
	_ = a.Free(b)
}

func TestEmptyCacheAndClose(t *testing.T) {
	f := newFakeDriver(0)
	a, _ := New(f, 100*MiB)
	keep, _ := a.Alloc(3*MiB, 0)
	x, _ := a.Alloc(5*MiB, 0)
	_ = a.Free(x)
	if err := a.EmptyCache(); err != nil {
		t.Fatal(err)
	}
	if st := a.Stats(); st.Reserved != 4*MiB || st.Allocated != 4*MiB || st.CachedBlocks != 0 {
		t.Errorf("after EmptyCache: %+v", st)
	}
	y, _ := a.Alloc(MiB, 0)
	_ = a.Free(y)
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Alloc(MiB, 0); !errors.Is(err, ErrClosed) {
		t.Errorf("Alloc after Close = %v", err)
	}
	if err := a.Free(keep); err != nil { // released to the driver now
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Error(err)
	}
	live, _, allocs, frees, ferr := f.state()
	if live != 0 || allocs != frees || ferr != nil {
		t.Errorf("after Close: live %d allocs %d frees %d err %v", live, allocs, frees, ferr)
	}
}

// TestConcurrent allocates from many goroutines on a few streams and checks
// that no block is handed to two users, the budget holds at the driver, and
// everything is accounted for.
func TestConcurrent(t *testing.T) {
	const budget = 64 * MiB
	f := newFakeDriver(0)
	a, _ := New(f, budget)
	var mu sync.Mutex
	inUse := map[Ptr]bool{}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 2))
			var held []*Block // up to 3 blocks held at once, released in random order
			release := func(i int) {
				b := held[i]
				held = append(held[:i], held[i+1:]...)
				mu.Lock()
				delete(inUse, b.Ptr)
				mu.Unlock()
				if err := a.Free(b); err != nil {
					t.Error(err)
				}
			}
			for range 400 {
				if len(held) == 3 || (len(held) > 0 && rng.IntN(2) == 0) {
					release(rng.IntN(len(held)))
				}
				n := 1 + rng.Uint64N(3*MiB)
				b, err := a.Alloc(n, Stream(rng.IntN(3)))
				if errors.Is(err, ErrOutOfMemory) {
					continue // 8 goroutines × 3 blocks may exceed the budget
				}
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				if inUse[b.Ptr] {
					t.Errorf("block %#x handed out twice", b.Ptr)
				}
				inUse[b.Ptr] = true
				mu.Unlock()
				held = append(held, b)
			}
			for len(held) > 0 {
				release(0)
			}
		}()
	}
	wg.Wait()
	st := a.Stats()
	live, peak, _, _, ferr := f.state()
	if ferr != nil || peak > budget || st.Allocated != 0 || st.Reserved != live || st.Hits+st.Misses != 8*400 {
		t.Errorf("stats %+v; driver live %d peak %d err %v", st, live, peak, ferr)
	}
	t.Logf("%s; %d hits, %d misses, %d driver allocs, %d OOMs", st, st.Hits, st.Misses, st.DriverAllocs, st.OOMs)
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if live, _, _, _, _ := f.state(); live != 0 {
		t.Errorf("%d bytes live after Close", live)
	}
}

func BenchmarkAllocFreeHit(b *testing.B) {
	a, _ := New(newFakeDriver(0), 1<<30)
	for b.Loop() {
		blk, err := a.Alloc(99532800, 1)
		if err != nil {
			b.Fatal(err)
		}
		_ = a.Free(blk)
	}
}
