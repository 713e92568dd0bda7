package sched

import (
	"context"
	"errors"
	"fmt"
)

// Float32 arrays (a .npy file's data) go through the executor as items of
// their own kind, for a segment of array ops (Op.Array): an array of n
// elements travels as ArrayShape(n), one row of n "pixels" of ElemBytes
// bytes that hold its little-endian elements in C order, so that slots,
// batches, copies and ping-pong buffers work for it as for an image. Its axes
// ride along to the device's ops (OpImage.Dims), and the values of its
// reductions (Op.Reduce) come back in Result.Values.

// Limits of an array item.
const (
	// ElemBytes is the size of one element, a float32: ArrayShape's C.
	ElemBytes = 4
	// MaxArrayElements bounds an array's elements (1 GiB of data), as
	// MaxSide bounds an image's sides.
	MaxArrayElements = 1 << 28
	// MaxDims bounds an array's axes (NumPy's own limit).
	MaxDims = 64
)

// ArrayShape is the shape in which an array of n elements travels.
func ArrayShape(n int) Shape { return Shape{W: n, H: 1, C: ElemBytes} }

// CheckArrayShape reports whether s is ArrayShape(n) for an n from 1 to
// MaxArrayElements: the array items a device must run.
func CheckArrayShape(s Shape) error {
	switch {
	case s.C != ElemBytes || s.H != 1:
		return fmt.Errorf("array item is %v, want %d×1×%d", s, s.W, ElemBytes)
	case s.W < 1 || s.W > MaxArrayElements:
		return fmt.Errorf("array of %d elements, want 1 to %d", s.W, MaxArrayElements)
	}
	return nil
}

// ReserveArray takes room for a float32 array of axes dims (C order; none for
// a 0-d array) as Reserve does for an image: Image is an ArrayShape image in
// the slot's page-locked input, where the caller writes the elements'
// little-endian bytes, then Commit (or Abort). An array without elements
// (an axis of length 0) is an error: no device runs it. One that cannot fit
// in an empty slot, or has over MaxArrayElements, gives an error wrapping
// ErrTooLarge at once; run it on the CPU instead. The segment must take arrays (Op.Array).
func (e *Executor) ReserveArray(ctx context.Context, dims []int, tag any) (*Reservation, error) {
	if !e.chain.array {
		return nil, fmt.Errorf("reserve array: %q takes images", SegmentString(e.cfg.Ops))
	}
	n, err := arrayElements(dims)
	if err != nil {
		return nil, fmt.Errorf("reserve array: %w", err)
	}
	in := ArrayShape(n)
	if m := min(e.cfg.SlotBytes, e.cfg.hostIn()); in.Bytes() > m {
		return nil, fmt.Errorf("%w: an array of %d elements needs %d bytes, a slot holds %d", ErrTooLarge, n, in.Bytes(), m)
	}
	req, err := e.request(in, tag)
	if err != nil {
		return nil, err
	}
	req.hostNeed = req.need[0]
	req.dims = append([]int{}, dims...)
	return e.reserve(ctx, req)
}

// arrayElements is the number of elements of an array of axes dims, checked
// against MaxDims and MaxArrayElements.
func arrayElements(dims []int) (int, error) {
	if len(dims) > MaxDims {
		return 0, fmt.Errorf("%d axes, at most %d", len(dims), MaxDims)
	}
	n := 1
	for _, d := range dims {
		switch {
		case d < 0:
			return 0, fmt.Errorf("axes %v: a negative length", dims)
		case d == 0:
			return 0, errors.New("an array without elements")
		case n > MaxArrayElements/d:
			return 0, fmt.Errorf("%w: axes %v hold over %d elements", ErrTooLarge, dims, MaxArrayElements)
		}
		n *= d
	}
	return n, nil
}
