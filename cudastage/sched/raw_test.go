package sched

import (
	"context"
	"errors"
	"math"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestRunRaw(t *testing.T) {
	ops := []Op{GrayscaleOp(), mustBlur(t, 1.5), TransposeOp(), HistogramOp()}
	dev := NewFake(FakeConfig{H2DRate: 200e6, D2HRate: 200e6})
	defer dev.Close()
	st, err := RunRaw(context.Background(), dev, Config{Ops: ops, Streams: 3, Batch: 4}, RawOptions{Width: 64, Height: 36, Frames: 50, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	if st.Frames != 50 || st.Pixels != 50*64*36 || st.Device.Images != 50 {
		t.Errorf("frames %d pixels %d device images %d", st.Frames, st.Pixels, st.Device.Images)
	}
	if st.Wall <= 0 || st.GPixelsPerSec() <= 0 || st.Device.Overlap() < 1 {
		t.Errorf("wall %v, %v GP/s, overlap %v", st.Wall, st.GPixelsPerSec(), st.Device.Overlap())
	}
	// Frames are written once per slot place, then reused: the input bytes
	// moved are the batches', not a refill each time.
	if got := dev.Calls()["HtoD"]; got < 2*int(st.Device.Batches) {
		t.Errorf("%d H2D copies for %d timed batches (and tables)", got, st.Device.Batches)
	}
	if live := dev.Live(); live != (FakeLive{}) {
		t.Errorf("left behind: %+v", live)
	}
}

// zeroCounter counts the zero bytes of every H2D source.
type zeroCounter struct {
	*FakeDevice
	zeros, total atomic.Int64
}

func (z *zeroCounter) HtoD(s Stream, dst DevPtr, off int, src []byte) error {
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

func TestRunRawFramesAreRandom(t *testing.T) {
	fake := NewFake(FakeConfig{})
	defer fake.Close()
	dev := &zeroCounter{FakeDevice: fake}
	// 3·W·H is a multiple of Align: the input copies hold no padding, so
	// every byte copied is a frame byte, and the tables hold few zeros
	// against them.
	_, err := RunRaw(context.Background(), dev, Config{Ops: []Op{GrayscaleOp()}, Streams: 2, Slots: 3, Batch: 2},
		RawOptions{Width: 256, Height: 64, Frames: 30})
	if err != nil {
		t.Fatal(err)
	}
	// Random bytes are zero 1 time in 256.
	if z, n := dev.zeros.Load(), dev.total.Load(); n == 0 || float64(z)/float64(n) > 0.01 {
		t.Errorf("%d of %d bytes copied in are zero: frames are not random", z, n)
	}
}

func TestRunRawErrors(t *testing.T) {
	ops := []Op{GrayscaleOp()}
	tests := []struct {
		name  string
		cfg   Config
		opt   RawOptions
		fault func(string) error
		want  string
	}{
		{"no frames", Config{Ops: ops}, RawOptions{Width: 8, Height: 8}, nil, "frames"},
		{"bad size", Config{Ops: ops}, RawOptions{Width: 0, Height: 8, Frames: 1}, nil, "at least 1x1"},
		{"bad config", Config{Ops: ops, Streams: -2}, RawOptions{Width: 8, Height: 8, Frames: 1}, nil, "streams"},
		{"device fault", Config{Ops: ops, Batch: 2}, RawOptions{Width: 8, Height: 8, Frames: 100}, func(c string) error {
			if c == "Run grayscale" {
				return errors.New("boom")
			}
			return nil
		}, "boom"},
	}
	for _, tt := range tests {
		dev := NewFake(FakeConfig{Fault: tt.fault})
		_, err := RunRaw(context.Background(), dev, tt.cfg, tt.opt)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: RunRaw = %v, want an error about %q", tt.name, err, tt.want)
		}
		if live := dev.Live(); live != (FakeLive{}) {
			t.Errorf("%s: left behind: %+v", tt.name, live)
		}
		dev.Close()
	}
	// Cancellation.
	dev := NewFake(FakeConfig{CopyLatency: time.Millisecond})
	defer dev.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	_, err := RunRaw(ctx, dev, Config{Ops: ops, Batch: 2}, RawOptions{Width: 8, Height: 8, Frames: 1 << 20})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("cancelled RunRaw = %v", err)
	}
	if live := dev.Live(); live != (FakeLive{}) {
		t.Errorf("cancelled: left behind: %+v", live)
	}
}

func TestMeasureCopy(t *testing.T) {
	dev := NewFake(FakeConfig{H2DRate: 100e6, D2HRate: 50e6})
	defer dev.Close()
	bw, err := MeasureCopy(dev, 1<<20, 3)
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
	if live := dev.Live(); live != (FakeLive{}) {
		t.Errorf("left behind: %+v", live)
	}
	if _, err := MeasureCopy(dev, 0, 3); err == nil {
		t.Error("MeasureCopy of 0 bytes accepted")
	}
	broken := NewFake(FakeConfig{Fault: func(c string) error {
		if c == "DtoH" {
			return errors.New("dead")
		}
		return nil
	}})
	defer broken.Close()
	if _, err := MeasureCopy(broken, 4096, 2); err == nil || !strings.Contains(err.Error(), "dead") {
		t.Errorf("MeasureCopy on a failing device = %v", err)
	}
}
