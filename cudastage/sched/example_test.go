package sched_test

import (
	"context"
	"fmt"
	"time"

	"github.com/imgpipe/imgpipe/cudastage/sched"
	"github.com/imgpipe/imgpipe/cudastage/sched/schedtest"
)

// A segment grayscale | transpose | histogram over two images, on the CPU
// fake device. With a GPU, the device is the CUDA adapter instead.
func Example() {
	dev := schedtest.NewFake(schedtest.FakeConfig{})
	defer dev.Close()
	ops := []sched.Op{sched.GrayscaleOp(), sched.TransposeOp(), sched.HistogramOp()}
	ctx := context.Background()
	e, err := sched.New(ctx, dev, sched.Config{Ops: ops, Streams: 2, Slots: 4, Batch: 4, SlotBytes: 1 << 16, Linger: 20 * time.Millisecond})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer e.Close()

	for i, size := range [][2]int{{4, 2}, {3, 5}} {
		r, err := e.Reserve(ctx, size[0], size[1], 3, i)
		if err != nil {
			fmt.Println(err)
			return
		}
		pix := r.Image().Pix // page-locked: a decoder writes here
		for k := range pix {
			pix[k] = byte(10 * k)
		}
		r.Commit()
	}
	e.CloseInput()
	for res := range e.Results() {
		fmt.Printf("image %d: %dx%d in, %dx%dx%d out, %d pixels counted\n", res.Tag, res.In.W, res.In.H,
			res.Image.W, res.Image.H, res.Image.C, sum(res.Hist))
		res.Release()
	}
	if err := e.Wait(); err != nil {
		fmt.Println(err)
	}
	// Output:
	// image 0: 4x2 in, 2x4x1 out, 8 pixels counted
	// image 1: 3x5 in, 5x3x1 out, 15 pixels counted
}

func sum(h *[256]uint64) (n uint64) {
	for _, c := range h {
		n += c
	}
	return n
}
