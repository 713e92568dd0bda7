package cu

import (
	"fmt"
	"sort"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Page-locked host memory is mapped here and locked with cuMemHostRegister, instead of
// coming from cuMemHostAlloc: mapped in huge pages (hugePage, where the kernel's
// transparent huge pages allow it), it is locked and freed several times faster
// (bench/results/2026-12-07-code-comments.md#cudastagecu). A GPU run's
// first batch waits for its slots to be locked, and its end for them to be freed.
const (
	hugePage = 2 << 20
	// memHostRegisterPortable is CU_MEMHOSTREGISTER_PORTABLE: the memory is page-locked
	// for every context, as cuMemHostAlloc's CU_MEMHOSTALLOC_PORTABLE made it.
	memHostRegisterPortable = 1
)

// pinned records the page-locked allocations of this process, so that async
// copies can refuse memory that is not page-locked and MemFreeHost can refuse
// slices it did not hand out.
var pinned struct {
	sync.RWMutex
	spans []span // sorted by base, non-overlapping
}

// span is one allocation: the caller's bytes [base, end), in a mapping of mapped bytes
// that starts at base.
type span struct{ base, end, mapped uintptr }

func addPinned(sp span) {
	pinned.Lock()
	defer pinned.Unlock()
	i := sort.Search(len(pinned.spans), func(i int) bool { return pinned.spans[i].base >= sp.base })
	pinned.spans = append(pinned.spans, span{})
	copy(pinned.spans[i+1:], pinned.spans[i:])
	pinned.spans[i] = sp
}

// removePinned forgets the allocation starting exactly at base and returns it.
func removePinned(base uintptr) (span, bool) {
	pinned.Lock()
	defer pinned.Unlock()
	i := sort.Search(len(pinned.spans), func(i int) bool { return pinned.spans[i].base >= base })
	if i == len(pinned.spans) || pinned.spans[i].base != base {
		return span{}, false
	}
	sp := pinned.spans[i]
	pinned.spans = append(pinned.spans[:i], pinned.spans[i+1:]...)
	return sp, true
}

// IsPinned reports whether b lies entirely inside memory from MemHostAlloc.
// An empty slice is not pinned.
func IsPinned(b []byte) bool {
	if len(b) == 0 {
		return false
	}
	p := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	pinned.RLock()
	defer pinned.RUnlock()
	i := sort.Search(len(pinned.spans), func(i int) bool { return pinned.spans[i].end > p })
	return i < len(pinned.spans) && pinned.spans[i].base <= p && p+uintptr(len(b)) <= pinned.spans[i].end
}

// MemHostAlloc allocates n bytes of page-locked host memory, usable by every
// context, and returns it as a slice over that memory, zeroed. It needs a
// current context. The memory is outside the Go heap: it is never moved or
// collected, and must be freed with MemFreeHost; the slice must not be used
// after that. A request for more than the machine's memory fails before
// anything is mapped.
func MemHostAlloc(n int) ([]byte, error) {
	d, err := get()
	if err != nil {
		return nil, err
	}
	if n <= 0 {
		return nil, &Error{Call: "cuMemHostRegister", Code: ErrorInvalidValue, Name: codeNames[ErrorInvalidValue], Msg: fmt.Sprintf("invalid size %d", n)}
	}
	if uint64(n) > physicalMemory() {
		return nil, newError(d, "cuMemHostRegister", ErrorOutOfMemory)
	}
	p, mapped, err := mapHost(uintptr(n))
	if err != nil {
		return nil, &Error{Call: "mmap", Code: ErrorOutOfMemory, Name: codeNames[ErrorOutOfMemory], Msg: err.Error()}
	}
	if err := d.call("cuMemHostRegister", d.cuMemHostRegister, uintptr(p), uintptr(n), memHostRegisterPortable); err != nil {
		unix.MunmapPtr(p, mapped)
		return nil, err
	}
	addPinned(span{base: uintptr(p), end: uintptr(p) + uintptr(n), mapped: mapped})
	return unsafe.Slice((*byte)(p), n), nil
}

// mapHost maps n bytes of anonymous memory, returning it and the mapping's length: from n of
// one huge page on, aligned to one and advised to use them (the kernel backs such a mapping
// with 2 MiB pages, which lock fast).
func mapHost(n uintptr) (unsafe.Pointer, uintptr, error) {
	page := uintptr(unix.Getpagesize())
	size, slack := (n+page-1)&^(page-1), uintptr(0)
	if n >= hugePage {
		size, slack = (n+hugePage-1)&^(hugePage-1), hugePage
	}
	p, err := unix.MmapPtr(-1, 0, nil, size+slack, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON)
	if err != nil || slack == 0 {
		return p, size, err
	}
	// Keep the aligned part: unmap the slack before and after it.
	head := -uintptr(p) & (hugePage - 1)
	if head > 0 {
		unix.MunmapPtr(p, head)
	}
	if tail := slack - head; tail > 0 {
		unix.MunmapPtr(unsafe.Add(p, head+size), tail)
	}
	p = unsafe.Add(p, head)
	adviseHuge(unsafe.Slice((*byte)(p), size))
	return p, size, nil
}

// MemFreeHost frees memory from MemHostAlloc. b must be the slice that
// MemHostAlloc returned (or a reslice starting at its first byte).
func MemFreeHost(b []byte) error {
	d, err := get()
	if err != nil {
		return err
	}
	if cap(b) == 0 {
		return fmt.Errorf("cuMemHostUnregister: empty slice")
	}
	p := unsafe.Pointer(unsafe.SliceData(b))
	sp, ok := removePinned(uintptr(p))
	if !ok {
		return fmt.Errorf("cuMemHostUnregister: %p was not returned by MemHostAlloc (or was freed already)", p)
	}
	if err := d.call("cuMemHostUnregister", d.cuMemHostUnregister, uintptr(p)); err != nil {
		return err // still locked: leave it mapped
	}
	return unix.MunmapPtr(p, sp.mapped)
}
