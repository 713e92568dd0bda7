package sched_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/imgpipe/imgpipe/cudastage/sched"
	"github.com/imgpipe/imgpipe/cudastage/sched/schedtest"

	"github.com/imgpipe/imgpipe/stages/stagestest"
)

func TestCancelEndsEverything(t *testing.T) {
	base := runtime.NumGoroutine()
	dev := schedtest.NewFake(schedtest.FakeConfig{H2DRate: 5e6, D2HRate: 5e6, KernelLatency: 200 * time.Microsecond})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ops := []Op{GrayscaleOp(), MustBlurOp(t, 2), TransposeOp(), HistogramOp()}
	e, err := New(ctx, dev, Config{Ops: ops, Streams: 3, Slots: 5, Batch: 3, SlotBytes: 40000, Linger: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	rng := rand.New(rand.NewPCG(9, 9))
	img := stagestest.RandImage(rng, 33, 65, 3)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				r, err := e.Reserve(ctx, img.W, img.H, img.C, nil)
				if err != nil {
					return
				}
				copy(r.Image().Pix, img.Pix)
				time.Sleep(100 * time.Microsecond) // a decode, in progress at cancel
				r.Commit()
			}
		}()
	}
	n := 0
	for r := range e.Results() {
		time.Sleep(200 * time.Microsecond)
		r.Release()
		if n++; n == 20 {
			cancel()
		}
	}
	wg.Wait()
	if err := e.Wait(); !errors.Is(err, context.Canceled) {
		t.Errorf("Wait = %v, want context.Canceled", err)
	}
	if n := e.FreeSlots(); n != 5 {
		t.Errorf("%d of 5 slots free after cancel: slot leaked", n)
	}
	if err := e.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if live := dev.Live(); live != (schedtest.FakeLive{}) {
		t.Errorf("device objects left: %+v", live)
	}
	dev.Close()
	goroutinesBack(t, base)
}

// poisonTable breaks one launch table, as a bad offset would on a GPU.
type poisonTable struct {
	*schedtest.FakeDevice
	n atomic.Int64
}

func (p *poisonTable) EncodeTable(call *OpCall, dst []byte) error {
	if err := p.FakeDevice.EncodeTable(call, dst); err != nil {
		return err
	}
	if p.n.Add(1) == 3 {
		dst[7] = 0x40 // first image's source offset += 2^62
	}
	return nil
}

func TestFatalDeviceError(t *testing.T) {
	nth := func(call string, n int64) func(string) error {
		var count atomic.Int64
		return func(c string) error {
			if c == call && count.Add(1) == n {
				return errors.New("injected illegal address")
			}
			return nil
		}
	}
	tests := []struct {
		name    string
		fault   func(string) error
		poison  bool
		wantMsg string
	}{
		{name: "kernel", fault: nth("Run blur", 3), wantMsg: "injected"},
		{name: "h2d", fault: nth("HtoD", 4), wantMsg: "injected"},
		{name: "d2h", fault: nth("DtoH", 2), wantMsg: "injected"},
		{name: "stream wait", fault: nth("StreamWait", 5), wantMsg: "injected"},
		{name: "poisoned table", poison: true, wantMsg: "illegal address"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			base := runtime.NumGoroutine()
			fake := schedtest.NewFake(schedtest.FakeConfig{Fault: tt.fault, CopyLatency: 50 * time.Microsecond})
			var dev Device = fake
			if tt.poison {
				dev = &poisonTable{FakeDevice: fake}
			}
			ops := []Op{GrayscaleOp(), MustBlurOp(t, 1), HistogramOp()}
			e, err := New(context.Background(), dev, Config{Ops: ops, Streams: 3, Slots: 4, Batch: 2, SlotBytes: 1 << 15, Linger: time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			imgs := mixedImages(4, 200)
			errc := make(chan error, 1)
			go func() { errc <- pushAll(context.Background(), e, imgs, 3) }()
			n := 0
			for r := range e.Results() {
				n++
				r.Release()
			}
			werr := e.Wait()
			var fe *schedtest.FakeError
			if !errors.As(werr, &fe) || !fe.Sticky() || !strings.Contains(werr.Error(), tt.wantMsg) {
				t.Fatalf("Wait = %v, want a sticky device error with %q", werr, tt.wantMsg)
			}
			if n >= len(imgs) {
				t.Errorf("all %d images delivered despite the fault", n)
			}
			if perr := <-errc; perr != nil && !errors.Is(perr, werr) && !errors.Is(perr, ErrInputClosed) {
				t.Errorf("Reserve after the fault: %v, want the device error", perr)
			}
			if _, err := e.Reserve(context.Background(), 2, 2, 3, nil); !errors.As(err, &fe) {
				t.Errorf("Reserve after stop = %v, want the device error", err)
			}
			e.Close()
			fake.Close()
			goroutinesBack(t, base)
		})
	}
}

func TestNewFailsCleanly(t *testing.T) {
	ops := []Op{GrayscaleOp(), HistogramOp()}
	for _, call := range []string{"NewStream", "NewEvent", "HostAlloc", "DevAlloc"} {
		for _, n := range []int64{1, 4} {
			t.Run(fmt.Sprintf("%s#%d", call, n), func(t *testing.T) {
				var count atomic.Int64
				dev := schedtest.NewFake(schedtest.FakeConfig{Fault: func(c string) error {
					if c == call && count.Add(1) == n {
						return errors.New("no memory")
					}
					return nil
				}})
				defer dev.Close()
				// Four streams, so that the 4th NewStream is called.
				e, err := New(context.Background(), dev, Config{Ops: ops, Streams: 4, Slots: 3, Batch: 2, SlotBytes: 4096, Linger: 20 * time.Millisecond})
				if err == nil {
					e.Close()
					t.Fatal("New succeeded despite the fault")
				}
				if !strings.Contains(err.Error(), "no memory") {
					t.Errorf("New error %v", err)
				}
				if live := dev.Live(); live != (schedtest.FakeLive{}) {
					t.Errorf("left after a failed New: %+v", live)
				}
			})
		}
	}
	// Out of device memory (not sticky) is an error too.
	dev := schedtest.NewFake(schedtest.FakeConfig{MaxDeviceBytes: 10000})
	defer dev.Close()
	if _, err := New(context.Background(), dev, Config{Ops: ops, Streams: 4, Slots: 3, Batch: 2, SlotBytes: 4096, Linger: 20 * time.Millisecond}); err == nil || !strings.Contains(err.Error(), "out of memory") {
		t.Errorf("New over device memory: %v", err)
	}
	if live := dev.Live(); live != (schedtest.FakeLive{}) {
		t.Errorf("left after a failed New: %+v", live)
	}
}

func TestConfigErrors(t *testing.T) {
	ops := []Op{GrayscaleOp()}
	// with is a valid config but for what set changes, so that each case
	// fails for its own reason only.
	with := func(set func(*Config)) Config {
		c := testConfig(ops)
		set(&c)
		return c
	}
	zero := []string{ // the messages of zero Streams, Slots, Batch and SlotBytes
		fmt.Sprintf("streams 0 out of range [1, %d]", MaxStreams),
		fmt.Sprintf("slots 0 out of range [1, %d]", MaxSlots),
		fmt.Sprintf("batch 0 out of range [1, %d]", MaxBatch),
		fmt.Sprintf("slot bytes 0 out of range [%d, %d]", Align, MaxSlotBytes),
	}
	tests := []struct {
		cfg  Config
		want []string // one line of the error each
	}{
		{with(func(c *Config) { c.Ops = nil }), []string{"no ops"}},
		{with(func(c *Config) { c.Ops = []Op{{Name: "boxblur"}} }), []string{"no CPU function"}},
		{with(func(c *Config) { c.Streams = -1 }), []string{"streams"}},
		{with(func(c *Config) { c.Streams = MaxStreams + 1 }), []string{"streams"}},
		{with(func(c *Config) { c.Slots = -3 }), []string{"slots"}},
		{with(func(c *Config) { c.Slots = MaxSlots + 1 }), []string{"slots"}},
		{with(func(c *Config) { c.Batch = MaxBatch + 1 }), []string{"batch"}},
		{with(func(c *Config) { c.SlotBytes = 100 }), []string{"slot bytes"}},
		{with(func(c *Config) { c.SlotBytes = MaxSlotBytes + 1 }), []string{"slot bytes"}},
		{with(func(c *Config) { c.Slots, c.SlotBytes, c.MaxHostBytes = 4, 1<<20, 4<<20 }), []string{"page-locked"}},
		{with(func(c *Config) { c.Slots, c.SlotBytes, c.MaxDeviceBytes = 4, 1<<20, 4<<20 }), []string{"device memory"}},
		// The executor has no defaults: a zero field is refused, not filled.
		{with(func(c *Config) { c.Streams = 0 }), zero[0:1]},
		{with(func(c *Config) { c.Slots = 0 }), zero[1:2]},
		{with(func(c *Config) { c.Batch = 0 }), zero[2:3]},
		{with(func(c *Config) { c.SlotBytes = 0 }), zero[3:4]},
		{Config{Ops: ops}, zero}, // every problem is reported
	}
	for _, tt := range tests {
		dev := schedtest.NewFake(schedtest.FakeConfig{})
		_, err := New(context.Background(), dev, tt.cfg)
		if err == nil || strings.Count(err.Error(), "\n") != len(tt.want)-1 {
			t.Errorf("New(%+v) = %v, want an error of %d line(s) about %q", tt.cfg, err, len(tt.want), tt.want)
		}
		for _, want := range tt.want {
			if err != nil && !strings.Contains(err.Error(), want) {
				t.Errorf("New(%+v) = %v, want an error about %q", tt.cfg, err, want)
			}
		}
		if c := dev.Calls(); len(c) != 0 || dev.Live() != (schedtest.FakeLive{}) {
			t.Errorf("New(%+v) used the device before refusing: %v %+v", tt.cfg, c, dev.Live())
		}
		dev.Close()
	}
}

func TestCloseWithHeldResults(t *testing.T) {
	dev := schedtest.NewFake(schedtest.FakeConfig{})
	e, err := New(context.Background(), dev, Config{Ops: []Op{GrayscaleOp()}, Streams: 2, Slots: 2, Batch: 1, SlotBytes: 4096, Linger: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	imgs := mixedImages(8, 2)
	commitAll(t, e, imgs)
	held := <-e.Results() // the other stays undelivered: Close drains it
	e.CloseInput()
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if live := dev.Live(); live.HostBufs == 0 || live.Streams != 0 {
		t.Fatalf("after Close with a held result: %+v, want only the held slot's memory", live)
	}
	want, _ := cpuRef([]Op{GrayscaleOp()}, imgs[held.Tag.(int)])
	if d := stagestest.Diff(held.Image, want); d != "" {
		t.Errorf("held result after Close: %s", d)
	}
	held.Release()
	if live := dev.Live(); live != (schedtest.FakeLive{}) {
		t.Errorf("after the last Release: %+v", live)
	}
	if err := e.Close(); err != nil { // twice is harmless
		t.Error(err)
	}
	dev.Close()
}
