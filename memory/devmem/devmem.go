// Package devmem is a caching allocator for device memory, in the manner of
// PyTorch's CUDA caching allocator.
//
// cuMemAlloc and cuMemFree are slow (cuMemFree waits for the whole device),
// so freed blocks are kept and reused: in steady state a pipeline that
// allocates the same sizes batch after batch makes no driver call at all.
// Sizes are rounded (powers of two up to 1 MiB, multiples of 2 MiB above) so
// that similar requests share blocks, and a cached block up to 25% larger than
// the request is reused rather than allocating.
//
// Stream ordering: a block belongs to the stream it was allocated for. Free
// puts it back in that stream's cache at once, even if work queued on the
// stream still uses it; this is safe because it is only reused by later
// allocations for the same stream, whose work runs after. Blocks cached for
// other streams are never reused, only released to the driver (cuMemFree
// waits for the device, so that is safe too).
//
// Budget: the bytes held from the driver (Stats.Reserved) never exceed the
// budget. When a request does not fit, cached blocks are released first; when
// the driver reports out of memory, the whole cache is released and the
// allocation retried once. A request that still fails returns an *OOMError
// with the allocator's figures, which wraps ErrOutOfMemory. Other driver
// errors are returned as they are.
//
// The package knows no driver API: addresses and streams are plain numbers
// (Ptr, Stream), so that any device layer (the CUDA driver, the scheduler's
// Device, a fake) can draw on it.
package devmem

import (
	"errors"
	"fmt"
	"sort"
	"sync"
)

// Ptr is a device address (a CUdeviceptr on CUDA), or any handle the driver
// hands out.
type Ptr uint64

// Stream names the queue a block belongs to (a CUstream on CUDA). Stream 0
// is a stream like any other: a caller that frees blocks only once the
// device finished with them may use it for every block.
type Stream uintptr

// Driver is the device memory interface the allocator draws on: the CUDA
// driver on a GPU (with the right context current), a fake in tests.
type Driver interface {
	MemAlloc(n uint64) (Ptr, error)
	MemFree(p Ptr) error
	// IsOutOfMemory reports whether an error of MemAlloc means that the
	// device is out of memory, so that releasing cached blocks may help.
	IsOutOfMemory(err error) bool
}

// ErrOutOfMemory is wrapped by every *OOMError.
var ErrOutOfMemory = errors.New("device out of memory")

// ErrClosed is returned by Alloc after Close.
var ErrClosed = errors.New("devmem: allocator closed")

// Rounding granularities.
const (
	smallLimit = 1 << 20 // requests up to this size round to a power of two
	minBlock   = 512     // smallest block
	largeRound = 2 << 20 // larger requests round to a multiple of this
)

// RoundSize returns the block size that serves a request of n bytes.
func RoundSize(n uint64) uint64 {
	if n <= minBlock {
		return minBlock
	}
	if n <= smallLimit {
		r := uint64(minBlock)
		for r < n {
			r <<= 1
		}
		return r
	}
	return (n + largeRound - 1) / largeRound * largeRound
}

// Stats is a snapshot of the allocator's figures.
type Stats struct {
	Budget        uint64 `json:"budget"`         // bytes the allocator may hold
	Allocated     uint64 `json:"allocated"`      // bytes of blocks in use (like torch.cuda.memory_allocated)
	Reserved      uint64 `json:"reserved"`       // bytes held from the driver (like torch.cuda.memory_reserved)
	PeakAllocated uint64 `json:"peak_allocated"` // high-water mark of Allocated
	PeakReserved  uint64 `json:"peak_reserved"`  // high-water mark of Reserved
	Blocks        int    `json:"blocks"`         // blocks held from the driver
	CachedBlocks  int    `json:"cached_blocks"`  // of which free, in the cache
	Hits          uint64 `json:"hits"`           // allocations served from the cache
	Misses        uint64 `json:"misses"`         // allocations that went to the driver
	DriverAllocs  uint64 `json:"driver_allocs"`  // successful cuMemAlloc calls
	DriverFrees   uint64 `json:"driver_frees"`   // cuMemFree calls
	OOMs          uint64 `json:"ooms"`           // allocations that failed for lack of memory
}

// String formats the figures for logs and errors.
func (s Stats) String() string {
	return fmt.Sprintf("allocated %s, reserved %s, budget %s (peak allocated %s, peak reserved %s)",
		human(s.Allocated), human(s.Reserved), human(s.Budget), human(s.PeakAllocated), human(s.PeakReserved))
}

func human(n uint64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.2f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	default:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
}

// OOMError reports an allocation that could not be satisfied, with the
// allocator's figures at the time.
type OOMError struct {
	Requested uint64 // bytes asked for
	Rounded   uint64 // block size needed
	Stats     Stats  // figures after releasing the cache
	Err       error  // the driver's error, or nil when the budget was the limit
}

// Error names the request, the figures and the cause.
func (e *OOMError) Error() string {
	cause := "over the budget"
	if e.Err != nil {
		cause = e.Err.Error()
	}
	return fmt.Sprintf("device out of memory: %s requested (%s block): %s: %s",
		human(e.Requested), human(e.Rounded), e.Stats, cause)
}

// Unwrap returns ErrOutOfMemory and the driver's error.
func (e *OOMError) Unwrap() []error {
	if e.Err == nil {
		return []error{ErrOutOfMemory}
	}
	return []error{ErrOutOfMemory, e.Err}
}

// Block is device memory handed out by Alloc. Return it with Free.
type Block struct {
	Ptr    Ptr    // device address
	Size   uint64 // bytes held (the rounded size), ≥ the request
	n      uint64
	stream Stream
	a      *Allocator
}

// Len returns the number of bytes asked for.
func (b *Block) Len() uint64 { return b.n }

// Stream returns the stream the block belongs to.
func (b *Block) Stream() Stream { return b.stream }

type cached struct {
	ptr  Ptr
	size uint64
}

// Allocator is a caching allocator for one device. It is safe for concurrent
// use.
type Allocator struct {
	drv    Driver
	budget uint64

	allocMu sync.Mutex // serialises driver calls made by Alloc

	mu     sync.Mutex // guards the fields below
	closed bool
	cache  map[Stream][]cached // per stream, sorted by size
	stats  Stats
}

// New returns an allocator drawing on drv that holds at most budget bytes.
func New(drv Driver, budget uint64) (*Allocator, error) {
	if drv == nil {
		return nil, errors.New("devmem: nil driver")
	}
	if budget < minBlock {
		return nil, fmt.Errorf("devmem: budget %d bytes is too small", budget)
	}
	return &Allocator{drv: drv, budget: budget, cache: map[Stream][]cached{}, stats: Stats{Budget: budget}}, nil
}

// Alloc returns a block of at least n bytes for use on stream s. Its contents
// are undefined.
func (a *Allocator) Alloc(n uint64, s Stream) (*Block, error) {
	if n == 0 {
		return nil, errors.New("devmem: zero-byte allocation")
	}
	r := RoundSize(n)
	if r > a.budget {
		a.mu.Lock()
		a.stats.OOMs++
		st := a.statsLocked()
		a.mu.Unlock()
		return nil, &OOMError{Requested: n, Rounded: r, Stats: st}
	}
	if b, err := a.fromCache(n, r, s); b != nil || err != nil {
		return b, err
	}
	// Misses are serialised so that blocks released to make room are gone
	// before the new one is allocated: the driver never holds more than the
	// budget for us, not even for a moment.
	a.allocMu.Lock()
	defer a.allocMu.Unlock()
	if b, err := a.fromCache(n, r, s); b != nil || err != nil {
		return b, err
	}

	a.mu.Lock()
	a.stats.Misses++
	// No allocation is pending (allocMu), so Reserved is Allocated plus the
	// cache: the request fits iff it fits beside the blocks in use.
	if a.stats.Allocated+r > a.budget {
		a.stats.OOMs++
		st := a.statsLocked()
		a.mu.Unlock()
		return nil, &OOMError{Requested: n, Rounded: r, Stats: st}
	}
	var victims []cached
	if a.stats.Reserved+r > a.budget {
		victims = a.evictLocked(a.stats.Reserved + r - a.budget)
	}
	a.reserveLocked(r)
	a.mu.Unlock()

	if err := a.release(victims); err != nil {
		a.unreserve(r)
		return nil, err
	}
	p, err := a.drv.MemAlloc(r)
	if err != nil && a.drv.IsOutOfMemory(err) {
		// Memory cached for other streams (or used by other processes)
		// may be what is missing: release the whole cache and retry once.
		a.mu.Lock()
		all := a.evictLocked(a.stats.Reserved)
		a.mu.Unlock()
		if len(all) > 0 {
			if rerr := a.release(all); rerr != nil {
				a.unreserve(r)
				return nil, rerr
			}
			p, err = a.drv.MemAlloc(r)
		}
	}
	if err != nil {
		a.unreserve(r)
		if !a.drv.IsOutOfMemory(err) {
			return nil, err
		}
		a.mu.Lock()
		a.stats.OOMs++
		st := a.statsLocked()
		a.mu.Unlock()
		return nil, &OOMError{Requested: n, Rounded: r, Stats: st, Err: err}
	}
	a.mu.Lock()
	a.stats.DriverAllocs++
	a.stats.Allocated += r
	a.stats.PeakAllocated = max(a.stats.PeakAllocated, a.stats.Allocated)
	a.mu.Unlock()
	return &Block{Ptr: p, Size: r, n: n, stream: s, a: a}, nil
}

// fromCache returns a cached block of stream s that fits (best fit, at most
// 25% larger than r), or nil.
func (a *Allocator) fromCache(n, r uint64, s Stream) (*Block, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return nil, ErrClosed
	}
	l := a.cache[s]
	i := sort.Search(len(l), func(i int) bool { return l[i].size >= r })
	if i == len(l) || l[i].size > r+r/4 {
		return nil, nil
	}
	c := l[i]
	a.cache[s] = append(l[:i], l[i+1:]...)
	a.stats.CachedBlocks--
	a.stats.Hits++
	a.stats.Allocated += c.size
	a.stats.PeakAllocated = max(a.stats.PeakAllocated, a.stats.Allocated)
	return &Block{Ptr: c.ptr, Size: c.size, n: n, stream: s, a: a}, nil
}

func (a *Allocator) reserveLocked(r uint64) {
	a.stats.Reserved += r
	a.stats.Blocks++
	a.stats.PeakReserved = max(a.stats.PeakReserved, a.stats.Reserved)
}

func (a *Allocator) unreserve(r uint64) {
	a.mu.Lock()
	a.stats.Reserved -= r
	a.stats.Blocks--
	a.mu.Unlock()
}

// evictLocked takes cached blocks totalling at least need bytes out of the
// cache, largest first (fewest driver calls), and un-reserves them; the
// caller releases them to the driver. a.mu must be held.
func (a *Allocator) evictLocked(need uint64) []cached {
	var all []cached
	for _, l := range a.cache {
		all = append(all, l...)
	}
	sort.Slice(all, func(i, j int) bool { return all[i].size > all[j].size })
	var victims []cached
	var got uint64
	for _, c := range all {
		if got >= need {
			break
		}
		victims = append(victims, c)
		got += c.size
	}
	if len(victims) == 0 {
		return nil
	}
	gone := make(map[Ptr]bool, len(victims))
	for _, v := range victims {
		gone[v.ptr] = true
		a.stats.Reserved -= v.size
		a.stats.Blocks--
		a.stats.CachedBlocks--
	}
	for s, l := range a.cache {
		kept := l[:0]
		for _, c := range l {
			if !gone[c.ptr] {
				kept = append(kept, c)
			}
		}
		if len(kept) == 0 {
			delete(a.cache, s)
		} else {
			a.cache[s] = kept
		}
	}
	return victims
}

// release frees blocks to the driver.
func (a *Allocator) release(blocks []cached) error {
	var errs []error
	for _, c := range blocks {
		err := a.drv.MemFree(c.ptr)
		a.mu.Lock()
		a.stats.DriverFrees++
		a.mu.Unlock()
		if err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("devmem: releasing cached blocks: %w", errors.Join(errs...))
	}
	return nil
}

// Free returns a block to its stream's cache (see the package documentation
// for why that is safe while work on the stream may still use it). After
// Close it releases the block to the driver instead. It panics if b is not a
// block of this allocator in use: a double free would hand the same memory
// to two users.
func (a *Allocator) Free(b *Block) error {
	if b == nil || b.a != a {
		panic("devmem: Free of a block that is not in use from this allocator")
	}
	b.a = nil
	a.mu.Lock()
	a.stats.Allocated -= b.Size
	if a.closed {
		a.stats.Reserved -= b.Size
		a.stats.Blocks--
		a.mu.Unlock()
		return a.release([]cached{{b.Ptr, b.Size}})
	}
	l := a.cache[b.stream]
	i := sort.Search(len(l), func(i int) bool { return l[i].size >= b.Size })
	l = append(l, cached{})
	copy(l[i+1:], l[i:])
	l[i] = cached{b.Ptr, b.Size}
	a.cache[b.stream] = l
	a.stats.CachedBlocks++
	a.mu.Unlock()
	return nil
}

// EmptyCache releases every cached block to the driver (like
// torch.cuda.empty_cache); blocks in use are untouched.
func (a *Allocator) EmptyCache() error {
	a.allocMu.Lock()
	defer a.allocMu.Unlock()
	a.mu.Lock()
	all := a.evictLocked(a.stats.Reserved)
	a.mu.Unlock()
	return a.release(all)
}

// Stats returns a snapshot of the figures.
func (a *Allocator) Stats() Stats {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.statsLocked()
}

func (a *Allocator) statsLocked() Stats { return a.stats }

// Close releases the cache and makes later Allocs fail with ErrClosed.
// Blocks still in use are released to the driver when freed. Close is
// idempotent.
func (a *Allocator) Close() error {
	a.allocMu.Lock()
	defer a.allocMu.Unlock()
	a.mu.Lock()
	if a.closed {
		a.mu.Unlock()
		return nil
	}
	a.closed = true
	all := a.evictLocked(a.stats.Reserved)
	a.mu.Unlock()
	return a.release(all)
}
