package bench

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/imgpipe/imgpipe/cudastage/sched"
	"github.com/imgpipe/imgpipe/cudastage/sched/schedtest"
	"github.com/imgpipe/imgpipe/stages"
)

// chainOps is the device segment of spec, as `imgpipe bench` builds it.
func chainOps(t testing.TB, spec string) []sched.Op {
	t.Helper()
	c, err := ParseChain(spec)
	if err != nil {
		t.Fatal(err)
	}
	return c.Ops
}

// pixelsPerSec is input pixels per second of a run's host wall time.
func pixelsPerSec(pool *Pool, frames int, d time.Duration) float64 {
	return float64(frames) * float64(pool.w*pool.h) / d.Seconds()
}

func TestRunFrames(t *testing.T) {
	ops := chainOps(t, DefaultChain(1.5))
	dev := schedtest.NewFake(schedtest.FakeConfig{H2DRate: 200e6, D2HRate: 200e6})
	defer dev.Close()
	pool := RandomPool(64, 36, 8, 1)
	res, err := RunFrames(context.Background(), dev, ops, pool, RunConfig{Streams: 3, Batch: 4, Frames: 50, Repeats: 1})
	if err != nil {
		t.Fatal(err)
	}
	st := res.Stats
	if len(res.Runs) != 1 || st.Images != 50 || st.Pixels != 50*64*36 {
		t.Errorf("runs %d, device images %d, pixels %d", len(res.Runs), st.Images, st.Pixels)
	}
	if res.Runs[0] <= 0 || pixelsPerSec(pool, 50, res.Runs[0]) <= 0 || st.Overlap() < 1 {
		t.Errorf("wall %v, overlap %v", res.Runs[0], st.Overlap())
	}
	// Frames are written once per slot place, then reused: the input bytes
	// moved are the batches', not a refill each time.
	if got := dev.Calls()["HtoD"]; got < 2*int(st.Batches) {
		t.Errorf("%d H2D copies for %d timed batches (and tables)", got, st.Batches)
	}
	if live := dev.Live(); live != (schedtest.FakeLive{}) {
		t.Errorf("left behind: %+v", live)
	}
}

// TestRunFramesMedian keeps the device stats of the median run, checks the first batch
// against the CPU chain and traces only the last timed run.
func TestRunFramesMedian(t *testing.T) {
	c, err := ParseChain(DefaultChain(1.5))
	if err != nil {
		t.Fatal(err)
	}
	dev := schedtest.NewFake(schedtest.FakeConfig{H2DRate: 1e9, D2HRate: 1e9})
	defer dev.Close()
	pool := RandomPool(16, 8, 3, 2)
	cpu := c.newCPU()
	var frames []int
	check := func(frame int, img *stages.Image, hist *[256]uint64) error {
		frames = append(frames, frame)
		want, wantH := cpu.run(pool.image(frame))
		if err := sameImage(img, want); err != nil {
			return err
		}
		if *hist != *wantH {
			return errors.New("histogram differs")
		}
		return nil
	}
	tr := sched.NewTrace("test", 0)
	res, err := RunFrames(context.Background(), dev, c.Ops, pool, RunConfig{Streams: 2, Batch: 4, Frames: 12,
		Warmup: 1, Repeats: 3, Trace: tr, Check: check})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Runs) != 3 || res.Stats.Images != 12 || res.Checked != 2 || res.CheckErr != nil || len(frames) != 2 {
		t.Errorf("runs %v, images %d, checked %d (frames %v), %v", res.Runs, res.Stats.Images, res.Checked, frames, res.CheckErr)
	}
	if n := tr.Len(); n == 0 {
		t.Error("the last timed run left no spans")
	}
}

// zeroCounter counts the zero bytes of every H2D source.
type zeroCounter struct {
	*schedtest.FakeDevice
	zeros, total atomic.Int64
}

func (z *zeroCounter) HtoD(s sched.Stream, dst sched.DevPtr, off int, src []byte) error {
	var n int64
	for _, b := range src {
		if b == 0 {
			n++
		}
	}
	z.zeros.Add(n)
	z.total.Add(int64(len(src)))
	return z.FakeDevice.HtoD(s, dst, off, src)
}

func TestRunFramesAreRandom(t *testing.T) {
	fake := schedtest.NewFake(schedtest.FakeConfig{})
	defer fake.Close()
	dev := &zeroCounter{FakeDevice: fake}
	// 3·W·H is a multiple of Align: the input copies hold no padding, so
	// every byte copied is a frame byte, and the tables hold few zeros
	// against them.
	_, err := RunFrames(context.Background(), dev, chainOps(t, "grayscale"), RandomPool(256, 64, 64, 1),
		RunConfig{Streams: 2, Batch: 2, Frames: 30, Repeats: 1})
	if err != nil {
		t.Fatal(err)
	}
	// Random bytes are zero 1 time in 256.
	if z, n := dev.zeros.Load(), dev.total.Load(); n == 0 || float64(z)/float64(n) > 0.01 {
		t.Errorf("%d of %d bytes copied in are zero: frames are not random", z, n)
	}
}

func TestRunFramesErrors(t *testing.T) {
	ops := chainOps(t, "grayscale")
	tests := []struct {
		name  string
		pool  *Pool
		cfg   RunConfig
		fault func(string) error
		want  string
	}{
		{"no frames", RandomPool(8, 8, 1, 1), RunConfig{Streams: 1, Batch: 1, Repeats: 1}, nil, "frames"},
		{"no runs", RandomPool(8, 8, 1, 1), RunConfig{Streams: 1, Batch: 1, Frames: 1}, nil, "timed run"},
		{"bad size", RandomPool(0, 8, 1, 1), RunConfig{Streams: 1, Batch: 1, Frames: 1, Repeats: 1}, nil, "at least 1x1"},
		{"bad config", RandomPool(8, 8, 1, 1), RunConfig{Streams: -2, Batch: 1, Frames: 1, Repeats: 1}, nil, "streams"},
		{"device fault", RandomPool(8, 8, 1, 1), RunConfig{Streams: 1, Batch: 2, Frames: 100, Repeats: 1}, func(c string) error {
			if c == "Run grayscale" {
				return errors.New("boom")
			}
			return nil
		}, "boom"},
	}
	for _, tt := range tests {
		dev := schedtest.NewFake(schedtest.FakeConfig{Fault: tt.fault})
		_, err := RunFrames(context.Background(), dev, ops, tt.pool, tt.cfg)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: RunFrames = %v, want an error about %q", tt.name, err, tt.want)
		}
		if live := dev.Live(); live != (schedtest.FakeLive{}) {
			t.Errorf("%s: left behind: %+v", tt.name, live)
		}
		dev.Close()
	}
	// Cancellation.
	dev := schedtest.NewFake(schedtest.FakeConfig{CopyLatency: time.Millisecond})
	defer dev.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	_, err := RunFrames(ctx, dev, ops, RandomPool(8, 8, 1, 1), RunConfig{Streams: 2, Batch: 2, Frames: 1 << 20, Repeats: 1})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("cancelled RunFrames = %v", err)
	}
	if live := dev.Live(); live != (schedtest.FakeLive{}) {
		t.Errorf("cancelled: left behind: %+v", live)
	}
}

func TestMeasureCopy(t *testing.T) {
	dev := schedtest.NewFake(schedtest.FakeConfig{H2DRate: 100e6, D2HRate: 50e6})
	defer dev.Close()
	bw, err := MeasureCopy(dev, 1<<20, 3, 0)
	if err != nil {
		t.Fatal(err)
	}
	// Sleep overshoots, never undershoots: measured ≤ configured, and close.
	if bw.H2D > 100e6*1.01 || bw.H2D < 100e6*0.2 || bw.D2H > 50e6*1.01 || bw.D2H < 50e6*0.2 {
		t.Errorf("measured %.0f / %.0f B/s, configured 100e6 / 50e6", bw.H2D, bw.D2H)
	}
	if math.IsNaN(bw.H2D) {
		t.Error("NaN")
	}
	if live := dev.Live(); live != (schedtest.FakeLive{}) {
		t.Errorf("left behind: %+v", live)
	}
	// The warm-up copies each way for warm before timing: a cold GPU's link is slower.
	const warm = 30 * time.Millisecond
	t0 := time.Now()
	if _, err := MeasureCopy(dev, 4096, 1, warm); err != nil {
		t.Fatal(err)
	}
	if el := time.Since(t0); el < 2*warm {
		t.Errorf("MeasureCopy with a %v warm-up took %v, want at least %v (each way)", warm, el, 2*warm)
	}
	if _, err := MeasureCopy(dev, 0, 3, 0); err == nil {
		t.Error("MeasureCopy of 0 bytes accepted")
	}
	broken := schedtest.NewFake(schedtest.FakeConfig{Fault: func(c string) error {
		if c == "DtoH" {
			return errors.New("dead")
		}
		return nil
	}})
	defer broken.Close()
	if _, err := MeasureCopy(broken, 4096, 2, 0); err == nil || !strings.Contains(err.Error(), "dead") {
		t.Errorf("MeasureCopy on a failing device = %v", err)
	}
}

// BenchmarkFakeOverlap runs the target chain on raw frames through the fake
// device, whose copy engines are slowed so that the three phases take
// similar times (about 4 ms H2D, 3 ms kernels, 5 ms D2H per batch here), for
// 1 to 4 streams. It reports the overlap efficiency: the sum of the phases
// over the largest with one stream (no overlap), near 1 with three or more.
// The figures show the scheduling, not any GPU's speed.
func BenchmarkFakeOverlap(b *testing.B) {
	ops := chainOps(b, DefaultChain(1.5))
	pool := RandomPool(320, 240, 16, 1)
	for _, streams := range []int{1, 2, 3, 4} {
		b.Run(fmt.Sprintf("streams=%d", streams), func(b *testing.B) {
			dev := schedtest.NewFake(schedtest.FakeConfig{H2DRate: 0.25e9, D2HRate: 0.08e9})
			defer dev.Close()
			var res RunResult
			for b.Loop() {
				var err error
				res, err = RunFrames(context.Background(), dev, ops, pool, RunConfig{Streams: streams, Batch: 4, Frames: 200, Repeats: 1})
				if err != nil {
					b.Fatal(err)
				}
			}
			b.Logf("%v", res.Stats)
			b.ReportMetric(res.Stats.Overlap(), "overlap")
			b.ReportMetric(200/res.Runs[0].Seconds(), "frames/s")
		})
	}
}
