package pinned

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"
	"unsafe"
)

// fakeAlloc tracks live allocations so tests can check that the pool never
// holds more than its budget, never frees twice and frees everything on Close.
type fakeAlloc struct {
	mu       sync.Mutex
	live     map[*byte]int
	liveSize int64
	peak     int64
	allocs   int
	frees    int
	failNext int // fail this many Alloc calls
	err      error
}

func newFake() *fakeAlloc { return &fakeAlloc{live: map[*byte]int{}} }

func (f *fakeAlloc) Alloc(n int) ([]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failNext > 0 {
		f.failNext--
		return nil, errors.New("fake: out of pinned memory")
	}
	b := make([]byte, n)
	f.live[&b[0]] = n
	f.liveSize += int64(n)
	f.peak = max(f.peak, f.liveSize)
	f.allocs++
	return b, nil
}

func (f *fakeAlloc) Free(b []byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	n, ok := f.live[&b[0]]
	if !ok {
		f.err = fmt.Errorf("free of unknown or freed buffer %p", &b[0])
		return f.err
	}
	delete(f.live, &b[0])
	f.liveSize -= int64(n)
	f.frees++
	return nil
}

func (f *fakeAlloc) snapshot() (live, peak int64, allocs, frees int, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.liveSize, f.peak, f.allocs, f.frees, f.err
}

func TestClassSize(t *testing.T) {
	for _, tc := range []struct{ n, want int }{
		{1, 4096}, {4096, 4096}, {4097, 4608}, {8192, 8192}, {8193, 9216},
		{1 << 20, 1 << 20}, {1<<20 + 1, 1<<20 + 1<<17},
		{1920 * 1080 * 3, 6 << 20}, // 6,220,800 bytes: a 1080p RGB image
		{1920 * 1080, 2 << 20},
	} {
		if got := ClassSize(tc.n); got != tc.want {
			t.Errorf("ClassSize(%d) = %d, want %d", tc.n, got, tc.want)
		}
	}
	prev := 0
	for n := 1; n < 1<<22; n += 1 + n/97 {
		c := ClassSize(n)
		if c < n || (n > minClass && float64(c) > float64(n)*1.125+1) || c < prev {
			t.Fatalf("ClassSize(%d) = %d: not in [n, 1.125n] or not monotonic (prev %d)", n, c, prev)
		}
		prev = c
	}
}

func TestNewAndGetErrors(t *testing.T) {
	for _, b := range []int64{0, -1} {
		if _, err := New(b, nil); err == nil {
			t.Errorf("New(%d): want error", b)
		}
	}
	p, err := New(64<<10, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, n := range []int{0, -5} {
		if _, err := p.Get(ctx, n); err == nil {
			t.Errorf("Get(%d): want error", n)
		}
	}
	// Larger than the whole budget: an immediate error, even with a context
	// that never ends.
	if _, err := p.Get(ctx, 64<<10+1); !errors.Is(err, ErrTooLarge) {
		t.Errorf("Get(budget+1) = %v, want ErrTooLarge", err)
	}
	if s := p.Stats(); s.Reserved != 0 || s.InUse != 0 || s.Misses != 0 {
		t.Errorf("failed Gets changed stats: %+v", s)
	}
}

func TestRequestEqualToBudgetIsNotRounded(t *testing.T) {
	f := newFake()
	p, _ := New(4500, f) // ClassSize(4500) = 4608 > budget
	b, err := p.Get(context.Background(), 4500)
	if err != nil {
		t.Fatal(err)
	}
	if b.Len() != 4500 || b.Cap() != 4500 || len(b.Bytes()) != 4500 {
		t.Errorf("Len %d Cap %d len(Bytes) %d, want 4500", b.Len(), b.Cap(), len(b.Bytes()))
	}
	if err := p.Put(b); err != nil {
		t.Fatal(err)
	}
}

// GetExact holds exactly what it was asked for, so that a budget of exactly
// the sum of the requests suffices, and reuses only buffers of that size.
func TestGetExact(t *testing.T) {
	f := newFake()
	p, _ := New(3*5000, f) // the classes of three 5000-byte Gets would not fit
	ctx := context.Background()
	var bufs []*Buffer
	for range 3 {
		b, err := p.GetExact(ctx, 5000)
		if err != nil {
			t.Fatal(err)
		}
		if b.Len() != 5000 || b.Cap() != 5000 {
			t.Fatalf("Len %d Cap %d, want 5000", b.Len(), b.Cap())
		}
		bufs = append(bufs, b)
	}
	for _, b := range bufs {
		_ = p.Put(b)
	}
	b, err := p.GetExact(ctx, 5000)
	if err != nil {
		t.Fatal(err)
	}
	_ = p.Put(b)
	if s := p.Stats(); s.Hits != 1 || s.Misses != 3 || s.Reserved != 15000 || s.Peak != 15000 || s.InUse != 0 {
		t.Errorf("stats %+v, want 1 hit, 3 misses, 15000 bytes reserved at the peak and now", s)
	}
	// Another size evicts what it must to stay in the budget; the peak stays.
	b, err = p.GetExact(ctx, 6000)
	if err != nil {
		t.Fatal(err)
	}
	if s := p.Stats(); s.Reserved != 11000 || s.Peak != 15000 || s.Evictions != 2 {
		t.Errorf("stats %+v, want 11000 reserved after 2 evictions, peak 15000", s)
	}
	_ = p.Put(b)
	if _, err := p.GetExact(ctx, 15001); !errors.Is(err, ErrTooLarge) {
		t.Errorf("GetExact(budget+1) = %v, want ErrTooLarge", err)
	}
	if _, err := p.GetExact(ctx, 0); err == nil {
		t.Error("GetExact(0): want error")
	}
}

func TestReuse(t *testing.T) {
	f := newFake()
	p, _ := New(1<<20, f)
	ctx := context.Background()
	b1, err := p.Get(ctx, 5000)
	if err != nil {
		t.Fatal(err)
	}
	if b1.Len() != 5000 || b1.Cap() != ClassSize(5000) || cap(b1.Bytes()) != 5000 {
		t.Fatalf("Len %d Cap %d cap(Bytes) %d", b1.Len(), b1.Cap(), cap(b1.Bytes()))
	}
	addr := unsafe.SliceData(b1.Bytes())
	if err := p.Put(b1); err != nil {
		t.Fatal(err)
	}
	// Same class (5000 and 5100 both round to 5120): served from the cache.
	b2, err := p.Get(ctx, 5100)
	if err != nil {
		t.Fatal(err)
	}
	if unsafe.SliceData(b2.Bytes()) != addr {
		t.Error("second Get of the same class did not reuse the buffer")
	}
	s := p.Stats()
	if s.Hits != 1 || s.Misses != 1 || s.Buffers != 1 || s.InUse != 5120 || s.Reserved != 5120 {
		t.Errorf("stats %+v, want 1 hit, 1 miss, 1 buffer, 5120 in use and reserved", s)
	}
	_ = p.Put(b2)
	if s := p.Stats(); s.InUse != 0 || s.Reserved != 5120 {
		t.Errorf("after Put: %+v", s)
	}
	if _, _, allocs, _, _ := f.snapshot(); allocs != 1 {
		t.Errorf("%d allocations, want 1", allocs)
	}
}

func TestGetBlocksUntilPut(t *testing.T) {
	f := newFake()
	p, _ := New(16<<10, f)
	ctx := context.Background()
	a, _ := p.Get(ctx, 8<<10)
	b, _ := p.Get(ctx, 8<<10)

	// The budget is used up: a Get with a deadline gives up with it.
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if _, err := p.Get(short, 8<<10); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Get over budget = %v, want DeadlineExceeded", err)
	}

	got := make(chan *Buffer)
	go func() {
		c, err := p.Get(ctx, 8<<10)
		if err != nil {
			t.Error(err)
		}
		got <- c
	}()
	select {
	case <-got:
		t.Fatal("Get returned while the budget was in use")
	case <-time.After(20 * time.Millisecond):
	}
	_ = p.Put(a)
	c := <-got
	if c == nil {
		t.Fatal("no buffer")
	}
	s := p.Stats()
	if s.Waits != 2 || s.Hits != 1 || s.Reserved != 16<<10 {
		t.Errorf("stats %+v: want 2 waits, 1 hit, 16 KiB reserved", s)
	}
	_ = p.Put(b)
	_ = p.Put(c)
	if _, peak, _, _, _ := f.snapshot(); peak > 16<<10 {
		t.Errorf("allocator peak %d exceeds the budget", peak)
	}
}

func TestGetCancelled(t *testing.T) {
	p, _ := New(8<<10, newFake())
	a, _ := p.Get(context.Background(), 8<<10)
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error)
	go func() {
		_, err := p.Get(ctx, 4<<10)
		errc <- err
	}()
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Errorf("Get = %v, want Canceled", err)
	}
	// The cancelled waiter took nothing: the budget is whole again after Put.
	_ = p.Put(a)
	b, err := p.Get(context.Background(), 8<<10)
	if err != nil {
		t.Fatal(err)
	}
	_ = p.Put(b)
}

func TestEvictionToMakeRoom(t *testing.T) {
	f := newFake()
	p, _ := New(32<<10, f)
	ctx := context.Background()
	var bufs []*Buffer
	for range 4 {
		b, _ := p.Get(ctx, 8<<10)
		bufs = append(bufs, b)
	}
	for _, b := range bufs {
		_ = p.Put(b)
	}
	// 32 KiB of free 8 KiB buffers; a 16 KiB request must release two.
	b, err := p.Get(ctx, 16<<10)
	if err != nil {
		t.Fatal(err)
	}
	s := p.Stats()
	if s.Evictions != 2 || s.Reserved != 32<<10 || s.Buffers != 3 {
		t.Errorf("stats %+v: want 2 evictions, 32 KiB reserved, 3 buffers", s)
	}
	live, peak, _, frees, ferr := f.snapshot()
	if ferr != nil || frees != 2 || live != 32<<10 || peak > 32<<10 {
		t.Errorf("allocator: live %d peak %d frees %d err %v", live, peak, frees, ferr)
	}
	_ = p.Put(b)
}

func TestAllocFailure(t *testing.T) {
	f := newFake()
	p, _ := New(1<<20, f)
	ctx := context.Background()
	f.failNext = 1
	if _, err := p.Get(ctx, 10000); err == nil {
		t.Fatal("want the allocator's error")
	}
	if s := p.Stats(); s.Reserved != 0 || s.InUse != 0 || s.Buffers != 0 {
		t.Errorf("stats not restored after failure: %+v", s)
	}
	// With free buffers cached, a failing Alloc releases them and retries.
	b, _ := p.Get(ctx, 100<<10)
	_ = p.Put(b)
	f.failNext = 1
	c, err := p.Get(ctx, 200<<10)
	if err != nil {
		t.Fatalf("retry after releasing the cache failed: %v", err)
	}
	if s := p.Stats(); s.Buffers != 1 || s.Reserved != int64(c.Cap()) {
		t.Errorf("stats %+v", s)
	}
	_ = p.Put(c)
	// The budget was fully released after the failure: a whole-budget Get works.
	d, err := p.Get(ctx, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	_ = p.Put(d)
}

func TestPutMisuse(t *testing.T) {
	p, _ := New(1<<20, nil)
	q, _ := New(1<<20, nil)
	b, _ := p.Get(context.Background(), 100)
	mustPanic(t, "Put to another pool", func() { _ = q.Put(b) })
	_ = p.Put(b)
	mustPanic(t, "double Put", func() { _ = p.Put(b) })
	mustPanic(t, "Put(nil)", func() { _ = p.Put(nil) })
}

func mustPanic(t *testing.T, what string, f func()) {
	t.Helper()
	defer func() {
		if recover() == nil {
			t.Errorf("%s did not panic", what)
		}
	}()
	f()
}

func TestClose(t *testing.T) {
	f := newFake()
	p, _ := New(16<<10, f)
	ctx := context.Background()
	a, _ := p.Get(ctx, 8<<10)
	b, _ := p.Get(ctx, 8<<10)
	_ = p.Put(b)
	c, _ := p.Get(ctx, 8<<10) // budget now used up by a and c

	errc := make(chan error)
	go func() {
		_, err := p.Get(ctx, 8<<10)
		errc <- err
	}()
	for p.Stats().Waits == 0 { // wait until the goroutine is waiting
		time.Sleep(time.Millisecond)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; !errors.Is(err, ErrClosed) {
		t.Errorf("waiting Get = %v, want ErrClosed", err)
	}
	if _, err := p.Get(ctx, 10); !errors.Is(err, ErrClosed) {
		t.Errorf("Get after Close = %v, want ErrClosed", err)
	}
	// Buffers in use at Close are released when put back.
	_ = p.Put(a)
	_ = p.Put(c)
	if err := p.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	live, _, allocs, frees, ferr := f.snapshot()
	if live != 0 || allocs != frees || ferr != nil {
		t.Errorf("after Close: %d bytes live, %d allocs, %d frees, err %v", live, allocs, frees, ferr)
	}
	if s := p.Stats(); s.Reserved != 0 || s.InUse != 0 || s.Buffers != 0 {
		t.Errorf("stats after Close: %+v", s)
	}
}

// TestConcurrent hammers the pool from many goroutines with random sizes and
// checks that the budget is never exceeded, no buffer is handed to two users
// at once, and everything is accounted for at the end.
func TestConcurrent(t *testing.T) {
	const budget = 256 << 10
	f := newFake()
	p, _ := New(budget, f)
	ctx := context.Background()
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 1))
			for i := range 300 {
				n := 1 + rng.IntN(64<<10)
				b, err := p.Get(ctx, n)
				if err != nil {
					t.Error(err)
					return
				}
				mark := byte(g*31 + i)
				buf := b.Bytes()
				for j := range buf {
					buf[j] = mark
				}
				for j := 0; j < len(buf); j += 97 {
					if buf[j] != mark {
						t.Errorf("buffer shared: byte %d changed under its owner", j)
						break
					}
				}
				if err := p.Put(b); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	s := p.Stats()
	live, peak, _, _, ferr := f.snapshot()
	if ferr != nil || peak > budget || s.InUse != 0 || s.Reserved != live || s.Hits+s.Misses != 8*300 {
		t.Errorf("stats %+v; allocator live %d peak %d err %v", s, live, peak, ferr)
	}
	t.Logf("%s", s)
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if live, _, _, _, _ := f.snapshot(); live != 0 {
		t.Errorf("%d bytes live after Close", live)
	}
}

func BenchmarkGetPutHit(b *testing.B) {
	p, _ := New(64<<20, nil)
	ctx := context.Background()
	for b.Loop() {
		buf, err := p.Get(ctx, 6220800)
		if err != nil {
			b.Fatal(err)
		}
		_ = p.Put(buf)
	}
}
