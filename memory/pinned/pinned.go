// Package pinned is a pool of page-locked host buffers with a fixed byte
// budget.
//
// Page-locked memory is what lets host↔device copies run asynchronously at
// full speed, but it is costly to allocate (milliseconds for large buffers)
// and takes physical memory away from the system. The pool therefore
// allocates it once and reuses it: buffers are kept on free lists by size
// class, and Get blocks (back-pressure) when the budget is in use instead of
// allocating more. The memory itself comes from an injected Allocator:
// cu.MemHostAlloc on a GPU, ordinary Go memory (Heap) without one, with the
// same API.
//
// Budget rules: the bytes held from the allocator (Stats.Reserved: buffers in
// use plus cached free buffers) never exceed the budget. A request larger than
// the whole budget fails at once. When the free buffers are of the wrong size,
// they are released to make room.
package pinned

import (
	"context"
	"errors"
	"fmt"
	"math/bits"
	"sort"
	"sync"

	"golang.org/x/sync/semaphore"
)

// Allocator provides the memory behind a Pool. Alloc returns a slice of
// exactly n bytes; Free releases one slice that Alloc returned. Both may be
// called from any goroutine.
type Allocator interface {
	Alloc(n int) ([]byte, error)
	Free(b []byte) error
}

// Heap is the Allocator used without a GPU: ordinary Go memory, released to
// the garbage collector.
var Heap Allocator = heapAllocator{}

type heapAllocator struct{}

func (heapAllocator) Alloc(n int) ([]byte, error) { return make([]byte, n), nil }
func (heapAllocator) Free([]byte) error           { return nil }

// Errors returned by Get.
var (
	// ErrClosed: the pool was closed.
	ErrClosed = errors.New("pinned: pool closed")
	// ErrTooLarge: the request exceeds the whole budget, so waiting would
	// never help.
	ErrTooLarge = errors.New("pinned: request larger than the pool budget")
)

// minClass is the smallest buffer handed out; smaller requests share it.
const minClass = 4 << 10

// ClassSize returns the buffer size that serves a request of n bytes: n
// rounded up to a multiple of 1/8 of its power-of-two range (at most 12.5%
// waste), and at least 4 KiB. Close sizes share a class so that buffers are
// reused across images of slightly different sizes.
func ClassSize(n int) int {
	if n <= minClass {
		return minClass
	}
	k := bits.Len(uint(n - 1)) // 2^(k-1) < n ≤ 2^k
	step := 1 << (k - 4)
	return (n + step - 1) &^ (step - 1)
}

// Stats is a snapshot of a Pool's counters.
type Stats struct {
	Budget    int64  `json:"budget"`    // bytes the pool may hold
	Reserved  int64  `json:"reserved"`  // bytes held from the allocator (in use + free)
	InUse     int64  `json:"in_use"`    // bytes of buffers handed out (class sizes)
	Peak      int64  `json:"peak"`      // high-water mark of Reserved
	Buffers   int    `json:"buffers"`   // buffers held from the allocator
	Hits      uint64 `json:"hits"`      // Gets served from a free buffer
	Misses    uint64 `json:"misses"`    // Gets that allocated
	Evictions uint64 `json:"evictions"` // free buffers released to make room
	Waits     uint64 `json:"waits"`     // Gets that had to wait for the budget
}

// Pool hands out reusable buffers within a byte budget. It is safe for
// concurrent use.
type Pool struct {
	alloc  Allocator
	budget int64
	sem    *semaphore.Weighted // weighted by class bytes in use or being allocated

	closing context.Context // cancelled by Close, wakes waiters
	cancel  context.CancelFunc

	allocMu sync.Mutex // serialises allocator calls made by Get

	mu      sync.Mutex // guards the fields below
	closed  bool
	free    map[int][][]byte // class size → free buffers, most recently used last
	stats   Stats
	buffers int
}

// New returns a pool of at most budget bytes backed by alloc (Heap when nil).
func New(budget int64, alloc Allocator) (*Pool, error) {
	if budget <= 0 {
		return nil, fmt.Errorf("pinned: budget must be positive, got %d", budget)
	}
	if alloc == nil {
		alloc = Heap
	}
	closing, cancel := context.WithCancel(context.Background())
	return &Pool{
		alloc:   alloc,
		budget:  budget,
		sem:     semaphore.NewWeighted(budget),
		closing: closing,
		cancel:  cancel,
		free:    make(map[int][][]byte),
		stats:   Stats{Budget: budget},
	}, nil
}

// Buffer is one buffer handed out by Get. Return it with Pool.Put; it must
// not be used afterwards.
type Buffer struct {
	pool *Pool
	mem  []byte // the whole class-sized allocation
	n    int
}

// Bytes returns the n bytes asked for. Its contents are whatever the previous
// user left: callers overwrite it.
func (b *Buffer) Bytes() []byte { return b.mem[:b.n:b.n] }

// Len returns the number of bytes asked for.
func (b *Buffer) Len() int { return b.n }

// Cap returns the class size actually held, which counts against the budget.
func (b *Buffer) Cap() int { return len(b.mem) }

// Get returns a buffer of n bytes. When the budget is in use it waits until
// buffers are put back, ctx is done (ctx's error is returned), or the pool is
// closed (ErrClosed). A request larger than the budget fails at once with
// ErrTooLarge.
func (p *Pool) Get(ctx context.Context, n int) (*Buffer, error) {
	if n <= 0 {
		return nil, fmt.Errorf("pinned: invalid size %d", n)
	}
	c := ClassSize(n)
	if int64(c) > p.budget {
		c = n // fits only unrounded, if at all
	}
	return p.get(ctx, n, c)
}

// GetExact is Get without size classes: the buffer holds exactly n bytes
// (Cap is n), and only a free buffer of exactly n bytes serves it. It is for
// callers whose sizes repeat exactly and who account memory to the byte, so
// that a budget of exactly what they need suffices (the executor's slots).
func (p *Pool) GetExact(ctx context.Context, n int) (*Buffer, error) {
	if n <= 0 {
		return nil, fmt.Errorf("pinned: invalid size %d", n)
	}
	return p.get(ctx, n, n)
}

// get returns a buffer of n bytes held in an allocation of c ≥ n bytes.
func (p *Pool) get(ctx context.Context, n, c int) (*Buffer, error) {
	if int64(c) > p.budget {
		return nil, fmt.Errorf("%w: %d bytes requested, budget is %d bytes", ErrTooLarge, n, p.budget)
	}
	if err := p.acquire(ctx, int64(c)); err != nil {
		return nil, err
	}

	if mem := p.takeFree(c); mem != nil {
		return &Buffer{pool: p, mem: mem, n: n}, nil
	}
	// Misses are serialised so that buffers evicted to make room are really
	// released before the new one is allocated: the allocator never holds
	// more than the budget, not even for a moment.
	p.allocMu.Lock()
	defer p.allocMu.Unlock()
	if mem := p.takeFree(c); mem != nil { // put back while we waited
		return &Buffer{pool: p, mem: mem, n: n}, nil
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		p.sem.Release(int64(c))
		return nil, ErrClosed
	}
	p.stats.Misses++
	victims := p.evictLocked(p.stats.Reserved + int64(c) - p.budget)
	p.stats.Reserved += int64(c)
	p.stats.InUse += int64(c)
	p.buffers++
	p.mu.Unlock()

	mem, err := p.allocate(c, victims)
	if err != nil {
		p.mu.Lock()
		p.stats.Reserved -= int64(c)
		p.stats.InUse -= int64(c)
		p.buffers--
		p.mu.Unlock()
		p.sem.Release(int64(c))
		return nil, err
	}
	p.mu.Lock()
	p.stats.Peak = max(p.stats.Peak, p.stats.Reserved)
	p.mu.Unlock()
	return &Buffer{pool: p, mem: mem, n: n}, nil
}

// takeFree pops a free buffer of class c and counts a hit, or returns nil.
func (p *Pool) takeFree(c int) []byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	l := p.free[c]
	if p.closed || len(l) == 0 {
		return nil
	}
	mem := l[len(l)-1]
	l[len(l)-1] = nil
	p.free[c] = l[:len(l)-1]
	p.stats.Hits++
	p.stats.InUse += int64(c)
	return mem
}

// acquire takes c bytes of the budget, waiting if needed.
func (p *Pool) acquire(ctx context.Context, c int64) error {
	if p.sem.TryAcquire(c) {
		return nil
	}
	if p.closing.Err() != nil {
		return ErrClosed
	}
	p.mu.Lock()
	p.stats.Waits++
	p.mu.Unlock()
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(p.closing, cancel) // Close wakes the waiter
	defer stop()
	if err := p.sem.Acquire(wctx, c); err != nil {
		if p.closing.Err() != nil {
			return ErrClosed
		}
		return fmt.Errorf("pinned: waiting for %d bytes: %w", c, err)
	}
	return nil
}

// evictLocked removes free buffers totalling at least need bytes from the
// free lists, largest classes first (fewest frees), and returns them to be
// released outside the lock. p.mu must be held.
func (p *Pool) evictLocked(need int64) [][]byte {
	if need <= 0 {
		return nil
	}
	classes := make([]int, 0, len(p.free))
	for c, l := range p.free {
		if len(l) > 0 {
			classes = append(classes, c)
		}
	}
	sort.Sort(sort.Reverse(sort.IntSlice(classes)))
	var victims [][]byte
	for _, c := range classes {
		for need > 0 && len(p.free[c]) > 0 {
			l := p.free[c]
			victims = append(victims, l[len(l)-1])
			l[len(l)-1] = nil
			p.free[c] = l[:len(l)-1]
			need -= int64(c)
			p.stats.Reserved -= int64(c)
			p.stats.Evictions++
			p.buffers--
		}
		if need <= 0 {
			break
		}
	}
	return victims
}

// drainLocked removes every free buffer from the free lists and returns
// them to be released outside the lock. p.mu must be held.
func (p *Pool) drainLocked() [][]byte {
	var all [][]byte
	for c, l := range p.free {
		for _, b := range l {
			all = append(all, b)
			p.stats.Reserved -= int64(c)
			p.buffers--
		}
		delete(p.free, c)
	}
	return all
}

// allocate releases the victims, then allocates c bytes. If the allocator
// fails, every other free buffer is released too and the allocation retried
// once: a cache of the wrong sizes must not cause a failure.
func (p *Pool) allocate(c int, victims [][]byte) ([]byte, error) {
	if err := p.release(victims); err != nil {
		return nil, err
	}
	mem, err := p.alloc.Alloc(c)
	if err != nil {
		p.mu.Lock()
		more := p.drainLocked()
		p.mu.Unlock()
		if len(more) == 0 {
			return nil, fmt.Errorf("pinned: allocating %d bytes (%s): %w", c, p.Stats(), err)
		}
		if rerr := p.release(more); rerr != nil {
			return nil, rerr
		}
		if mem, err = p.alloc.Alloc(c); err != nil {
			return nil, fmt.Errorf("pinned: allocating %d bytes (%s): %w", c, p.Stats(), err)
		}
	}
	if len(mem) != c {
		_ = p.alloc.Free(mem)
		return nil, fmt.Errorf("pinned: allocator returned %d bytes for %d", len(mem), c)
	}
	return mem, nil
}

func (p *Pool) release(bufs [][]byte) error {
	var errs []error
	for _, b := range bufs {
		if err := p.alloc.Free(b); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("pinned: releasing buffers: %w", errors.Join(errs...))
	}
	return nil
}

// Put returns a buffer to the pool for reuse. It panics if b is not a buffer
// of this pool that is in use (a double Put is a bug that would hand the same
// memory to two users). After Close, Put releases the memory instead.
func (p *Pool) Put(b *Buffer) error {
	if b == nil || b.pool != p || b.mem == nil {
		panic("pinned: Put of a buffer that is not in use from this pool")
	}
	mem := b.mem
	c := len(mem)
	b.pool, b.mem, b.n = nil, nil, 0

	p.mu.Lock()
	p.stats.InUse -= int64(c)
	closed := p.closed
	if closed {
		p.stats.Reserved -= int64(c)
		p.buffers--
	} else {
		p.free[c] = append(p.free[c], mem)
	}
	p.mu.Unlock()
	p.sem.Release(int64(c))
	if closed {
		return p.release([][]byte{mem})
	}
	return nil
}

// Stats returns a snapshot of the counters.
func (p *Pool) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.stats
	s.Buffers = p.buffers
	return s
}

// String formats the stats for error messages and logs.
func (s Stats) String() string {
	return fmt.Sprintf("budget %s, reserved %s (peak %s), in use %s, %d buffers, %d hits, %d misses, %d evictions, %d waits",
		mib(s.Budget), mib(s.Reserved), mib(s.Peak), mib(s.InUse), s.Buffers, s.Hits, s.Misses, s.Evictions, s.Waits)
}

func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

// Close releases the free buffers and makes later Gets fail with ErrClosed;
// waiting Gets return ErrClosed. Buffers still in use are released when they
// are Put. Close is idempotent.
func (p *Pool) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	p.cancel()
	victims := p.drainLocked()
	p.mu.Unlock()
	return p.release(victims)
}
