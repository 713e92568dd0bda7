package sched_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"

	. "github.com/imgpipe/imgpipe/cudastage/sched"
	"github.com/imgpipe/imgpipe/cudastage/sched/schedtest"
)

// TestHostInputSizedApart: with HostInBytes, a slot's page-locked input
// holds only that many bytes (files and raw pixels) while the device input
// keeps SlotBytes for decoded images: the memory figures differ by exactly
// the input's difference, files whose decoded pixels exceed the page-locked
// input decode correctly, and what cannot fit on either side is refused.
func TestHostInputSizedApart(t *testing.T) {
	ops := []Op{GrayscaleOp(), HistogramOp()}
	const slots, slotBytes, hostIn = 2, 1 << 18, 1 << 14
	full := Config{Ops: ops, Streams: 2, Slots: slots, Batch: 6, SlotBytes: slotBytes}
	split := full
	split.HostInBytes = hostIn

	for _, tc := range []struct {
		hostIn int
		want   string
	}{{slotBytes + Align, "host input bytes"}, {Align - 1, "host input bytes"}} {
		cfg := full
		cfg.HostInBytes = tc.hostIn
		dev := schedtest.NewFake(schedtest.FakeConfig{})
		if _, err := New(context.Background(), dev, cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("HostInBytes %d: New = %v, want %q", tc.hostIn, err, tc.want)
		}
		dev.Close()
	}

	ref := startExec(t, context.Background(), schedtest.NewFake(schedtest.FakeConfig{}), full)
	ref.WaitAllocated()
	dev := schedtest.NewFake(schedtest.FakeConfig{})
	e := startExec(t, context.Background(), dev, split)
	e.WaitAllocated()
	st := e.Stats()
	if ref := ref.Stats(); st.HostBytes != ref.HostBytes-slots*(slotBytes-hostIn) || st.DeviceBytes != ref.DeviceBytes {
		t.Errorf("host %d, device %d bytes; want %d and %d (the page-locked input %d bytes smaller per slot)",
			st.HostBytes, st.DeviceBytes, ref.HostBytes-slots*(slotBytes-hostIn), ref.DeviceBytes, slotBytes-hostIn)
	}
	if st.HostPool.Reserved != st.HostBytes {
		t.Errorf("page-locked pool holds %d bytes, want %d", st.HostPool.Reserved, st.HostBytes)
	}

	rng := rand.New(rand.NewPCG(3, 4))
	big := jpegFile(t, rng, 120, 90) // 32400 decoded bytes: more than the page-locked input
	if len(big) >= hostIn/4 {
		t.Fatalf("fixture of %d bytes: too large for the test", len(big))
	}
	if _, err := e.Reserve(context.Background(), 100, 100, 3, -1); !errors.Is(err, ErrTooLarge) {
		t.Errorf("raw 100x100x3 over the page-locked input: %v, want ErrTooLarge", err)
	}
	if _, err := e.ReserveFile(context.Background(), hostIn+1, Shape{W: 8, H: 8, C: 3}, 1, schedtest.RouteHW, -1); !errors.Is(err, ErrTooLarge) {
		t.Errorf("file over the page-locked input: %v, want ErrTooLarge", err)
	}
	var in []input
	for range 9 {
		in = append(in, input{file: big})
	}
	in = append(in, input{raw: randImage(rng, 30, 20, 3)})
	errc := make(chan error, 1)
	go func() { errc <- pushInputs(context.Background(), e, dev, in) }()
	n := 0
	for r := range e.Results() {
		i := r.Tag.(int)
		n++
		want, hist := cpuRef(ops, decoded(t, in[i]))
		if r.Err != nil {
			t.Errorf("input %d: %v", i, r.Err)
		} else if d := sameImage(r.Image, want); d != "" || *r.Hist != *hist {
			t.Errorf("input %d: %s (histogram equal: %v)", i, d, *r.Hist == *hist)
		}
		r.Release()
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if err := e.Wait(); err != nil || n != len(in) {
		t.Errorf("Wait = %v, %d results of %d", err, n, len(in))
	}
}
