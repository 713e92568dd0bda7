package sched

import (
	"context"
	"fmt"
	"testing"
)

// BenchmarkFakeOverlap runs the target chain on raw frames through the fake
// device, whose copy engines are slowed so that the three phases take
// similar times (about 4 ms H2D, 3 ms kernels, 5 ms D2H per batch here), for
// 1 to 4 streams. It reports the overlap efficiency: the sum of the phases
// over the largest with one stream (no overlap), near 1 with three or more.
// The figures show the scheduling, not any GPU's speed.
func BenchmarkFakeOverlap(b *testing.B) {
	ops := []Op{GrayscaleOp(), mustBlur(b, 1.5), TransposeOp(), HistogramOp()}
	for _, streams := range []int{1, 2, 3, 4} {
		b.Run(fmt.Sprintf("streams=%d", streams), func(b *testing.B) {
			dev := NewFake(FakeConfig{H2DRate: 0.25e9, D2HRate: 0.08e9})
			defer dev.Close()
			var st RawStats
			for b.Loop() {
				var err error
				st, err = RunRaw(context.Background(), dev, Config{Ops: ops, Streams: streams, Batch: 4},
					RawOptions{Width: 320, Height: 240, Frames: 200, Warmup: 16})
				if err != nil {
					b.Fatal(err)
				}
			}
			b.Logf("%v", st.Device)
			b.ReportMetric(st.Device.Overlap(), "overlap")
			b.ReportMetric(float64(st.Frames)/st.Wall.Seconds(), "frames/s")
		})
	}
}
