package sched_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/imgpipe/imgpipe/cudastage/sched"
	"github.com/imgpipe/imgpipe/cudastage/sched/schedtest"
)

// slotHostBufs is the number of page-locked buffers one slot of cfg takes
// (measured on a one-slot executor, which New allocates whole).
func slotHostBufs(t *testing.T, cfg Config) int {
	t.Helper()
	dev := schedtest.NewFake(schedtest.FakeConfig{})
	defer dev.Close()
	cfg.Slots = 1
	e, err := New(context.Background(), dev, cfg)
	if err != nil {
		t.Fatal(err)
	}
	n := dev.Live().HostBufs
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestSlotsAllocatedInBackground: New returns with the first slot's memory
// only, and a batch goes through the device while every later slot's
// page-locked allocation is still blocked; the others join once allocated,
// and each slot is allocated once. A failed allocation stops the executor
// with an error naming the slot; a stop while allocations are blocked ends
// them, and Close frees what was taken.
func TestSlotsAllocatedInBackground(t *testing.T) {
	ops := []Op{GrayscaleOp(), HistogramOp()}
	base := Config{Ops: ops, Streams: 2, Slots: 4, Batch: 2, SlotBytes: 64 << 10}
	perSlot := slotHostBufs(t, base)
	for _, tc := range []struct {
		name string
		fail error // the second slot's allocation fails with it
		stop bool  // Close while allocations are blocked
	}{
		{name: "blocked until the first batch is back"},
		{name: "failure stops the executor", fail: errors.New("out of page-locked memory")},
		{name: "close while blocked", stop: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gate, reached := make(chan struct{}), make(chan struct{}, 1)
			var allocs atomic.Int64
			dev := schedtest.NewFake(schedtest.FakeConfig{Fault: func(call string) error {
				if call != "HostAlloc" || allocs.Add(1) <= int64(perSlot) {
					return nil
				}
				if tc.fail != nil {
					return tc.fail
				}
				select {
				case reached <- struct{}{}:
				default:
				}
				<-gate
				return nil
			}})
			defer dev.Close()
			var once sync.Once
			open := func() { once.Do(func() { close(gate) }) }
			defer open()
			e, err := New(context.Background(), dev, base)
			if err != nil {
				t.Fatal(err)
			}
			if tc.fail != nil {
				err := e.Wait()
				if err == nil || !strings.Contains(err.Error(), "slot 1") || !strings.Contains(err.Error(), tc.fail.Error()) {
					t.Errorf("Wait = %v, want the failed allocation of slot 1", err)
				}
				_ = e.Close() // the device is broken: Close reports it again
				if live := dev.Live(); live.HostBufs != 0 {
					t.Errorf("%d page-locked buffers left after Close", live.HostBufs)
				}
				return
			}
			if tc.stop {
				<-reached // an allocation is in progress: Close waits for it, then frees all
				closed := make(chan error)
				go func() { closed <- e.Close() }()
				open()
				if err := <-closed; err != nil {
					t.Fatal(err)
				}
				if live := dev.Live(); live.HostBufs != 0 {
					t.Errorf("%d page-locked buffers left after Close", live.HostBufs)
				}
				return
			}
			imgs := mixedImages(7, 2)
			commitAll(t, e, imgs) // one full batch, in the first slot
			for range imgs {
				r := <-e.Results()
				if r.Err != nil || r.Image == nil {
					t.Fatalf("result %v: %v", r.Tag, r.Err)
				}
				r.Release()
			}
			<-reached // the background allocation of slot 1 has begun (it may start after the batch)
			if got := allocs.Load(); got != int64(perSlot)+1 {
				t.Errorf("%d page-locked allocations before the gate opened, want the first slot's %d and one blocked", got, perSlot)
			}
			open()
			e.WaitAllocated()
			if got, want := dev.Live().HostBufs, base.Slots*perSlot; got != want {
				t.Errorf("%d page-locked buffers, want %d (each slot once)", got, want)
			}
			more := mixedImages(8, 9)
			go pushAll(context.Background(), e, more, 2)
			checkResults(t, e, ops, more)
			if err := e.Wait(); err != nil {
				t.Fatal(err)
			}
			if n := e.FreeSlots(); n != base.Slots {
				t.Errorf("%d of %d slots free", n, base.Slots)
			}
			if err := e.Close(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestNoBatchBeforeEveryStreamIsWarm: with WarmDecoder, no batch reaches the device while
// any stream still warms its decoder up (nvJPEG aborts the process when it creates a
// decoder state in a context that a faulting batch has made unusable).
func TestNoBatchBeforeEveryStreamIsWarm(t *testing.T) {
	gate := make(chan struct{})
	var warms atomic.Int64
	early := make(chan string, 1)
	dev := schedtest.NewFake(schedtest.FakeConfig{Fault: func(call string) error {
		switch {
		case call == "WarmDecoder":
			if warms.Add(1) == 1 {
				<-gate // one stream's warm-up is slow; the other's returns at once
			}
		case call == "HtoD" || strings.HasPrefix(call, "Run "):
			select {
			case <-gate:
			default:
				select {
				case early <- call:
				default:
				}
			}
		}
		return nil
	}})
	defer dev.Close()
	e, err := New(context.Background(), dev, Config{Ops: []Op{GrayscaleOp()}, Streams: 2, Slots: 4, Batch: 2,
		SlotBytes: 64 << 10, Linger: time.Millisecond, WarmDecoder: true})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	imgs := mixedImages(3, 2)
	commitAll(t, e, imgs)
	select {
	case call := <-early:
		t.Errorf("%s reached the device while a stream was still warming up", call)
	case <-time.After(50 * time.Millisecond): // long enough for an eager stream to submit
	}
	close(gate)
	for range imgs {
		r := <-e.Results()
		if r.Err != nil {
			t.Fatalf("result %v: %v", r.Tag, r.Err)
		}
		r.Release()
	}
}
