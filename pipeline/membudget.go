package pipeline

import (
	"context"

	"golang.org/x/sync/semaphore"
)

// DefaultMemoryBudget bounds the memory that the inputs being decoded and processed at once
// may take together, whatever the number of workers. max_pixels bounds one image; this bounds
// their sum, so 16 workers given 16 hostile 100 MP files do not ask for 16 × 1.6 GB at once.
const DefaultMemoryBudget = 4 << 30

// BytesPerPixel is what the budget charges per decoded pixel: the decoder's own buffers (a
// progressive JPEG keeps about 12 bytes of coefficients per pixel in Go's decoder), the RGB
// result and the chain's intermediates. It errs on the high side: the budget is a ceiling,
// not an estimate of typical use.
const BytesPerPixel = 16

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

// acquire reserves the memory for an image of the given pixels and returns the function that
// gives it back. It blocks until enough is free or ctx ends.
func (b *memBudget) acquire(ctx context.Context, pixels int64) (release func(), err error) {
	if b == nil || pixels <= 0 {
		return func() {}, nil
	}
	n := min(pixels*BytesPerPixel, b.max)
	if err := b.sem.Acquire(ctx, n); err != nil {
		return nil, err
	}
	return func() { b.sem.Release(n) }, nil
}
