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

// TestHostOutputSizedApart: with HostOutBytes, a slot's page-locked output
// holds only that many bytes while the device buffers keep SlotBytes: the
// memory figures differ by exactly the output's difference, a batch whose
// outputs fill it is sealed early (and its results are still exact), and an
// image whose output alone cannot fit is refused before anything is taken.
func TestHostOutputSizedApart(t *testing.T) {
	ops := []Op{GrayscaleOp(), TransposeOp()}
	const slots, batch, slotBytes, hostOut = 2, 16, 1 << 18, 4096
	full := Config{Ops: ops, Streams: 2, Slots: slots, Batch: batch, SlotBytes: slotBytes}
	split := full
	split.HostOutBytes = hostOut

	for _, bad := range []int{slotBytes + Align, Align - 1} {
		cfg := full
		cfg.HostOutBytes = bad
		dev := schedtest.NewFake(schedtest.FakeConfig{})
		if _, err := New(context.Background(), dev, cfg); err == nil || !strings.Contains(err.Error(), "host output bytes") {
			t.Errorf("HostOutBytes %d: New = %v, want a range error", bad, err)
		}
		dev.Close()
	}

	ref := startExec(t, context.Background(), schedtest.NewFake(schedtest.FakeConfig{}), full)
	ref.WaitAllocated()
	dev := schedtest.NewFake(schedtest.FakeConfig{})
	e := startExec(t, context.Background(), dev, split)
	e.WaitAllocated()
	st := e.Stats()
	if ref := ref.Stats(); st.HostBytes != ref.HostBytes-slots*(slotBytes-hostOut) || st.DeviceBytes != ref.DeviceBytes {
		t.Errorf("host %d, device %d bytes; want %d and %d (the page-locked output %d bytes smaller per slot)",
			st.HostBytes, st.DeviceBytes, ref.HostBytes-slots*(slotBytes-hostOut), ref.DeviceBytes, slotBytes-hostOut)
	}

	// 100x100 RGB makes 10,000 gray bytes: more than the page-locked output.
	if _, err := e.Reserve(context.Background(), 100, 100, 3, -1); !errors.Is(err, ErrTooLarge) {
		t.Errorf("an output over the page-locked output: %v, want ErrTooLarge", err)
	}
	// 30x20 RGB makes 600 gray bytes (768 aligned): 5 fit in the output, so
	// 16 images need 4 batches where the slot's input alone would take one.
	rng := rand.New(rand.NewPCG(5, 6))
	var in []input
	for range batch {
		in = append(in, input{raw: randImage(rng, 30, 20, 3)})
	}
	errc := make(chan error, 1)
	go func() { errc <- pushInputs(context.Background(), e, dev, in) }()
	n := 0
	for r := range e.Results() {
		i := r.Tag.(int)
		n++
		want, _ := cpuRef(ops, decoded(t, in[i]))
		if r.Err != nil {
			t.Errorf("input %d: %v", i, r.Err)
		} else if d := sameImage(r.Image, want); d != "" {
			t.Errorf("input %d: %s", i, d)
		}
		r.Release()
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if err := e.Wait(); err != nil || n != len(in) {
		t.Errorf("Wait = %v, %d results of %d", err, n, len(in))
	}
	if got := e.Stats().Batches; got != 4 {
		t.Errorf("%d batches, want 4 (5 outputs of 768 bytes per 4096-byte output)", got)
	}
}

// TestOutputBytes: an image's room in the page-locked output is its last
// image's aligned bytes, or its encoder's bound; none without an image op.
func TestOutputBytes(t *testing.T) {
	in := Shape{W: 30, H: 20, C: 3}
	for _, tc := range []struct {
		ops  []Op
		want int
	}{
		{[]Op{GrayscaleOp()}, 768},
		{[]Op{GrayscaleOp(), TransposeOp()}, 768},
		{[]Op{TransposeOp()}, 2048},
		{[]Op{HistogramOp()}, 0},
	} {
		if got := OutputBytes(tc.ops, in); got != tc.want {
			t.Errorf("%s: OutputBytes = %d, want %d", SegmentString(tc.ops), got, tc.want)
		}
	}
}
