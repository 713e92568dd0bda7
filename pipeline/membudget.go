package pipeline

import (
	"context"
	"runtime/debug"

	"golang.org/x/sync/semaphore"
)

// DefaultMemoryBudget bounds the memory that the inputs being decoded and processed at once
// may take together, whatever the number of workers. max_pixels bounds one image; this bounds
// their sum, so 16 workers given 16 hostile 100 MP files do not ask for 16 × 1.6 GB at once.
const DefaultMemoryBudget = 4 << 30

// ChainBytesPerPixel is what the budget charges per pixel of the largest image along the
// chain (the decoded one, or a resize's larger output) for the chain's own buffers, beyond
// the decoder's working set (stages.Cost.WorkBytes, which holds the RGB result): one
// stage's output (3 bytes a pixel) and blur's 16-bit intermediate (6), rounded up. An
// input is charged, before its file is read beyond its head: the decoder's working set for
// its format (measured; a progressive JPEG keeps every coefficient) + this × that largest
// width × height (Plan.Check, from the header's) + its file's bytes, or for a file decoded
// as a stream (PNG, GIF, BMP, TIFF, WebP whose header lies in the head) the head and the
// stream's buffer instead.
const ChainBytesPerPixel = 10

// goMemoryHeadroom is what the Go memory limit allows beyond the budget: the runtime, the
// workers' recycled buffers, encoders and the report (see SetGoMemoryLimit).
const goMemoryHeadroom = 512 << 20

// SetGoMemoryLimit sets the Go runtime's soft memory limit to a run's memory budget
// (0: DefaultMemoryBudget) plus headroom for the rest of the process, so that the
// garbage collector returns the memory of finished images before the heap outgrows the
// budget, instead of letting it double first. A lower limit already set (GOMEMLIMIT) is
// kept; a negative budget (off) sets nothing. It returns the function that restores the
// previous limit.
func SetGoMemoryLimit(budget int64) (restore func()) {
	if budget < 0 {
		return func() {}
	}
	if budget == 0 {
		budget = DefaultMemoryBudget
	}
	old := debug.SetMemoryLimit(-1) // -1 reads it
	debug.SetMemoryLimit(min(old, budget+goMemoryHeadroom))
	return func() { debug.SetMemoryLimit(old) }
}

// memBudget is a weighted semaphore over bytes. An input that would need more than the
// whole budget takes all of it, so it runs alone rather than never.
type memBudget struct {
	sem *semaphore.Weighted
	max int64
}

// newMemBudget returns a budget of n bytes; n < 0 turns the budget off (nil).
func newMemBudget(n int64) *memBudget {
	if n < 0 {
		return nil
	}
	if n == 0 {
		n = DefaultMemoryBudget
	}
	return &memBudget{sem: semaphore.NewWeighted(n), max: n}
}

// acquire reserves n bytes (at most the whole budget; n < 0 means the whole budget) and
// returns the function that gives them back. It blocks until enough is free or ctx ends.
func (b *memBudget) acquire(ctx context.Context, n int64) (release func(), err error) {
	if b == nil || n == 0 {
		return func() {}, nil
	}
	if n < 0 || n > b.max {
		n = b.max
	}
	if err := b.sem.Acquire(ctx, n); err != nil {
		return nil, err
	}
	return func() { b.sem.Release(n) }, nil
}
