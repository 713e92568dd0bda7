package sched_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	. "github.com/imgpipe/imgpipe/cudastage/sched"
	"github.com/imgpipe/imgpipe/cudastage/sched/schedtest"

	"github.com/imgpipe/imgpipe/memory/devmem"
	"github.com/imgpipe/imgpipe/memory/pinned"
)

// runOnce pushes imgs through an executor on dev and checks the results.
func runOnce(t *testing.T, dev Device, cfg Config) Stats {
	t.Helper()
	e, err := New(context.Background(), dev, cfg)
	if err != nil {
		t.Fatal(err)
	}
	e.WaitAllocated() // the pools' figures count every slot
	imgs := mixedImages(5, 24)
	go pushAll(context.Background(), e, imgs, 2)
	checkResults(t, e, cfg.Ops, imgs)
	if err := e.Wait(); err != nil {
		t.Fatal(err)
	}
	st := e.Stats()
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	return st
}

// The executor's own pools hold exactly the slots' memory, take it once
// (misses only) and give it all back on Close.
func TestOwnPools(t *testing.T) {
	ops := []Op{GrayscaleOp(), TransposeOp(), HistogramOp()}
	dev := schedtest.NewFake(schedtest.FakeConfig{})
	defer dev.Close()
	st := runOnce(t, dev, Config{Ops: ops, Streams: 2, Slots: 3, Batch: 4, SlotBytes: 20000})
	h, d := st.HostPool, st.DevicePool
	bufs := int64(3 * 4) // slots × (in, out, hist, tables)
	if h.Reserved != st.HostBytes || h.Peak != st.HostBytes || h.InUse != st.HostBytes || h.Budget != st.HostBytes ||
		h.Hits != 0 || int64(h.Misses) != bufs {
		t.Errorf("page-locked pool %+v, want exactly the %d bytes of %d buffers, all misses", h, st.HostBytes, bufs)
	}
	if d.Reserved != uint64(st.DeviceBytes) || d.PeakReserved != d.Reserved || d.Allocated != d.Reserved || d.Hits != 0 ||
		int64(d.Misses) != bufs+2 {
		t.Errorf("device allocator %+v, want exactly the %d bytes of %d blocks and 2 scratch blocks", d, st.DeviceBytes, bufs)
	}
	for _, want := range []string{"page-locked ", " reserved (peak ", "device ", "0 pool hits"} {
		if !strings.Contains(st.String(), want) {
			t.Errorf("String() = %q, lacks %q", st.String(), want)
		}
	}
	if live := dev.Live(); live != (schedtest.FakeLive{}) {
		t.Errorf("left after Close: %+v", live)
	}
}

// Executors run one after another on shared pools reuse their memory, and
// leave it cached there until the pools are closed.
func TestSharedPools(t *testing.T) {
	ops := []Op{GrayscaleOp(), MustBlurOp(t, 1), HistogramOp()}
	dev := schedtest.NewFake(schedtest.FakeConfig{})
	defer dev.Close()
	host, err := pinned.New(64<<20, HostAllocator(dev))
	if err != nil {
		t.Fatal(err)
	}
	dmem, err := devmem.New(DeviceDriver(dev), 64<<20)
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{Ops: ops, Streams: 2, Slots: 3, Batch: 4, SlotBytes: 20000, HostPool: host, DevicePool: dmem}
	first := runOnce(t, dev, cfg)
	live := dev.Live()
	if live.HostBufs == 0 || live.DevBufs == 0 || live.Streams != 0 || live.Events != 0 {
		t.Errorf("after the first executor: %+v, want its buffers cached in the pools", live)
	}
	cfg.Streams = 3 // another sweep point, with the same slot sizes
	second := runOnce(t, dev, cfg)
	if n := first.HostPool.Misses; second.HostPool.Hits != n || second.HostPool.Misses != n {
		t.Errorf("page-locked pool after two executors %+v, want the second served from the %d buffers of the first", second.HostPool, n)
	}
	// The second executor's third stream needs one more scratch block.
	if n := first.DevicePool.Misses; second.DevicePool.Hits != n || second.DevicePool.Misses != n+1 || second.PoolHits() != second.HostPool.Hits+n {
		t.Errorf("device allocator after two executors %+v (first %+v), want the second to reuse the first's %d blocks", fmt.Sprintf("%#v", second.DevicePool), fmt.Sprintf("%#v", first.DevicePool), n)
	}
	if got := dev.Live(); got.HostBufs != live.HostBufs || got.DevBufs != live.DevBufs+1 {
		t.Errorf("the second executor left %+v, the first %+v: want the same buffers and one more scratch block", got, live)
	}
	if err := errors.Join(host.Close(), dmem.Close()); err != nil {
		t.Fatal(err)
	}
	if live := dev.Live(); live != (schedtest.FakeLive{}) {
		t.Errorf("left after closing the pools: %+v", live)
	}
}

// A shared pool's budget bounds the slots like MaxHostBytes and
// MaxDeviceBytes, before anything is allocated.
func TestSharedPoolBudgets(t *testing.T) {
	ops := []Op{GrayscaleOp()}
	dev := schedtest.NewFake(schedtest.FakeConfig{})
	defer dev.Close()
	host, _ := pinned.New(1<<20, HostAllocator(dev))
	dmem, _ := devmem.New(DeviceDriver(dev), 1<<20)
	defer host.Close()
	defer dmem.Close()
	for _, tt := range []struct {
		cfg  Config
		want string
	}{
		{Config{Ops: ops, Streams: 2, Slots: 4, Batch: 16, SlotBytes: 1 << 20, Linger: 20 * time.Millisecond, HostPool: host}, "page-locked memory, over the 1 MiB limit"},
		{Config{Ops: ops, Streams: 2, Slots: 4, Batch: 16, SlotBytes: 1 << 20, Linger: 20 * time.Millisecond, DevicePool: dmem}, "device memory, over the 1 MiB limit"},
	} {
		if _, err := New(context.Background(), dev, tt.cfg); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("New = %v, want an error with %q", err, tt.want)
		}
		if c := dev.Calls(); len(c) != 0 || dev.Live() != (schedtest.FakeLive{}) {
			t.Errorf("New used the device before refusing: %v %+v", c, dev.Live())
		}
	}
}

// oomFake says which of its errors mean out of memory, as the CUDA device
// does.
type oomFake struct{ *schedtest.FakeDevice }

func (oomFake) IsOutOfMemory(err error) bool { return strings.Contains(err.Error(), "out of memory") }

// When the device runs out of memory, a shared allocator releases the
// blocks it caches (of a previous executor's sizes) and retries.
func TestSharedDevicePoolReleasesItsCache(t *testing.T) {
	fake := schedtest.NewFake(schedtest.FakeConfig{MaxDeviceBytes: 1 << 20})
	defer fake.Close()
	dev := oomFake{fake}
	dmem, _ := devmem.New(DeviceDriver(dev), 1<<30)
	ops := []Op{HistogramOp()}
	// 2 slots of a 256 KiB input, 8 KiB of histograms and 512 B of tables.
	runOnce(t, dev, Config{Ops: ops, Streams: 1, Slots: 2, Batch: 4, SlotBytes: 256 << 10, DevicePool: dmem})
	// Other sizes, which the cache does not serve: 512 KiB, 64 KiB and 1 KiB
	// do not fit on the device beside the 529 KiB cached.
	cfg := Config{Ops: ops, Streams: 1, Slots: 1, Batch: 32, SlotBytes: 384 << 10, DevicePool: dmem}
	st := runOnce(t, dev, cfg)
	if st.DevicePool.DriverFrees != 6 || st.DevicePool.Hits != 0 {
		t.Errorf("device allocator %+v, want the first executor's 6 blocks released to make room", fmt.Sprintf("%#v", st.DevicePool))
	}
	// Without the cache to release, the device's error comes back with the
	// allocator's figures.
	cfg.SlotBytes = 1 << 20
	_, err := New(context.Background(), dev, cfg)
	if !errors.Is(err, devmem.ErrOutOfMemory) || !strings.Contains(err.Error(), "DevAlloc: out of memory") {
		t.Errorf("New beyond the device = %v, want a devmem OOM wrapping the device's error", err)
	}
	if err := dmem.Close(); err != nil {
		t.Fatal(err)
	}
	if live := fake.Live(); live != (schedtest.FakeLive{}) {
		t.Errorf("left after closing the allocator: %+v", live)
	}
}

// HostBytes, asked before an executor starts, is the page-locked memory it
// then takes, for every kind of slot buffer: images, histograms, reductions,
// launch tables, encoded files, and page-locked inputs and outputs of their
// own sizes.
func TestHostBytesIsWhatNewTakes(t *testing.T) {
	png := PNGOp(PNGBound)
	tests := []struct {
		name string
		cfg  Config
	}{
		{"pixels", Config{Ops: []Op{GrayscaleOp(), TransposeOp(), HistogramOp()}, Slots: 3, Batch: 4, SlotBytes: 20000}},
		{"blur tables", Config{Ops: []Op{MustBlurOp(t, 2), MustBoxBlurOp(t, 3)}, Slots: 4, Batch: 7, SlotBytes: 1 << 20}},
		{"histogram only", Config{Ops: []Op{HistogramOp()}, Slots: 2, Batch: 16, SlotBytes: 300000}},
		{"encode", Config{Ops: []Op{GrayscaleOp(), png}, Slots: 3, Batch: 5, SlotBytes: 1 << 20, HostOutBytes: 64 << 10}},
		{"files in", Config{Ops: []Op{TransposeOp()}, Slots: 2, Batch: 8, SlotBytes: 1 << 20, HostInBytes: 128 << 10}},
		{"reductions", Config{Ops: []Op{sumOp, firstOp}, Slots: 2, Batch: 9, SlotBytes: 40000}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dev := schedtest.NewFake(schedtest.FakeConfig{})
			cfg := tt.cfg
			cfg.Streams, cfg.Linger = 2, time.Millisecond
			want := HostBytes(dev, cfg)
			e := startExec(t, context.Background(), dev, cfg)
			if got := e.Stats().HostBytes; got != want || got <= 0 {
				t.Errorf("HostBytes = %d, the executor took %d", want, got)
			}
		})
	}
}
