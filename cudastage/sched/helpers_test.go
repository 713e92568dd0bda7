package sched_test

import (
	"context"
	"runtime"
	"testing"
	"time"

	. "github.com/imgpipe/imgpipe/cudastage/sched"
	"github.com/imgpipe/imgpipe/cudastage/sched/schedtest"

	"github.com/imgpipe/imgpipe/stages"
)

// cpuRef runs ops on the CPU reference: the expected output and the last
// histogram (nil without one).
func cpuRef(ops []Op, src *stages.Image) (*stages.Image, *[256]uint64) {
	cur := src
	var hist *[256]uint64
	for _, op := range ops {
		if op.Hist {
			hist = new([256]uint64)
			op.CPU(nil, cur, hist)
			continue
		}
		out := op.OutShape(cur.Shape())
		dst := stages.NewImage(out.W, out.H, out.C)
		op.CPU(dst, cur, nil)
		cur = dst
	}
	return cur, hist
}

// testConfig is a valid Config over ops with the values of a default run
// (pipeline's defaults: 2 streams, Streams+2 slots, batches of 16 1080p RGB
// frames, 20 ms linger). The executor has no defaults of its own.
func testConfig(ops []Op) Config {
	return Config{Ops: ops, Streams: 2, Slots: 4, Batch: 16, SlotBytes: 16 * testFrameBytes, Linger: 20 * time.Millisecond}
}

// testFrameBytes is a 1080p RGB frame's bytes, aligned as a slot packs it.
const testFrameBytes = (1920*1080*3 + Align - 1) &^ (Align - 1)

// startExec starts an executor on dev and registers its cleanup: Close, and
// no device object left behind.
func startExec(t *testing.T, ctx context.Context, dev *schedtest.FakeDevice, cfg Config) *Executor {
	t.Helper()
	e, err := New(ctx, dev, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		e.Close()
		if live := dev.Live(); live != (schedtest.FakeLive{}) {
			t.Errorf("device objects left after Close: %+v", live)
		}
		dev.Close()
	})
	return e
}

// goroutinesBack waits until the goroutine count is back to base (timers and
// exiting goroutines need a moment) and fails the test otherwise.
func goroutinesBack(t *testing.T, base int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		n := runtime.NumGoroutine()
		if n <= base {
			return
		}
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<16)
			buf = buf[:runtime.Stack(buf, true)]
			t.Fatalf("%d goroutines, %d before:\n%s", n, base, buf)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
