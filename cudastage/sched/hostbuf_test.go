package sched_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"

	. "github.com/imgpipe/imgpipe/cudastage/sched"
	"github.com/imgpipe/imgpipe/cudastage/sched/schedtest"

	"github.com/imgpipe/imgpipe/stages/stagestest"
)

// TestHostInputSizedApart: with HostInBytes, a slot's page-locked input
// holds only that many bytes (files and raw pixels) while the device input
// keeps SlotBytes for decoded images: the memory figures differ by exactly
// the input's difference, files whose decoded pixels exceed the page-locked
// input decode correctly, and what cannot fit on either side is refused.
func TestHostInputSizedApart(t *testing.T) {
	ops := []Op{GrayscaleOp(), HistogramOp()}
	const hostIn = 1 << 14
	full := Config{Ops: ops, Streams: 2, Slots: 2, Batch: 6, SlotBytes: 1 << 18}
	e, dev := startSplit(t, full, func(c *Config, n int) { c.HostInBytes = n }, hostIn, "host input bytes")

	rng := rand.New(rand.NewPCG(3, 4))
	big := jpegFile(t, rng, 120, 90) // 32400 decoded bytes: more than the page-locked input
	if len(big) >= hostIn/4 {
		t.Fatalf("fixture of %d bytes: too large for the test", len(big))
	}
	if _, err := e.Reserve(context.Background(), 100, 100, 3, -1); !errors.Is(err, ErrTooLarge) {
		t.Errorf("raw 100x100x3 over the page-locked input: %v, want ErrTooLarge", err)
	}
	if _, err := e.ReserveFile(context.Background(), File{Size: hostIn + 1, Shape: Shape{W: 8, H: 8, C: 3}, Orient: 1, Decoder: RouteHW}, -1); !errors.Is(err, ErrTooLarge) {
		t.Errorf("file over the page-locked input: %v, want ErrTooLarge", err)
	}
	var in []input
	for range 9 {
		in = append(in, input{file: big})
	}
	in = append(in, input{raw: stagestest.RandImage(rng, 30, 20, 3)})
	runChecked(t, e, dev, ops, in)
}

// TestHostOutputSizedApart: with HostOutBytes, a slot's page-locked output
// holds only that many bytes while the device buffers keep SlotBytes: the
// memory figures differ by exactly the output's difference, a batch whose
// outputs fill it is sealed early (and its results are still exact), and an
// image whose output alone cannot fit is refused before anything is taken.
func TestHostOutputSizedApart(t *testing.T) {
	ops := []Op{GrayscaleOp(), TransposeOp()}
	const batch, hostOut = 16, 4096
	full := Config{Ops: ops, Streams: 2, Slots: 2, Batch: batch, SlotBytes: 1 << 18}
	e, dev := startSplit(t, full, func(c *Config, n int) { c.HostOutBytes = n }, hostOut, "host output bytes")

	// 100x100 RGB makes 10,000 gray bytes: more than the page-locked output.
	if _, err := e.Reserve(context.Background(), 100, 100, 3, -1); !errors.Is(err, ErrTooLarge) {
		t.Errorf("an output over the page-locked output: %v, want ErrTooLarge", err)
	}
	// 30x20 RGB makes 600 gray bytes (768 aligned): 5 fit in the output, so
	// 16 images need 4 batches where the slot's input alone would take one.
	rng := rand.New(rand.NewPCG(5, 6))
	var in []input
	for range batch {
		in = append(in, input{raw: stagestest.RandImage(rng, 30, 20, 3)})
	}
	runChecked(t, e, dev, ops, in)
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

// startSplit checks a page-locked buffer sized apart from a slot's SlotBytes: set(cfg, n)
// with n out of [Align, SlotBytes] is refused with an error naming what, and with n
// the slots hold exactly (SlotBytes-n) page-locked bytes less each than with full, and
// as many device bytes. It returns the executor started with n, and its device.
func startSplit(t *testing.T, full Config, set func(*Config, int), n int, what string) (*Executor, *schedtest.FakeDevice) {
	t.Helper()
	for _, bad := range []int{full.SlotBytes + Align, Align - 1} {
		cfg := full
		set(&cfg, bad)
		dev := schedtest.NewFake(schedtest.FakeConfig{})
		if _, err := New(context.Background(), dev, cfg); err == nil || !strings.Contains(err.Error(), what) {
			t.Errorf("%s %d: New = %v, want a range error", what, bad, err)
		}
		dev.Close()
	}
	ref := startExec(t, context.Background(), schedtest.NewFake(schedtest.FakeConfig{}), full)
	ref.WaitAllocated()
	split := full
	set(&split, n)
	dev := schedtest.NewFake(schedtest.FakeConfig{})
	e := startExec(t, context.Background(), dev, split)
	e.WaitAllocated()
	st, less := e.Stats(), int64(full.Slots*(full.SlotBytes-n))
	if ref := ref.Stats(); st.HostBytes != ref.HostBytes-less || st.DeviceBytes != ref.DeviceBytes {
		t.Errorf("%s %d: host %d, device %d bytes; want %d and %d", what, n, st.HostBytes, st.DeviceBytes, ref.HostBytes-less, ref.DeviceBytes)
	}
	if st.HostPool.Reserved != st.HostBytes {
		t.Errorf("page-locked pool holds %d bytes, want %d", st.HostPool.Reserved, st.HostBytes)
	}
	return e, dev
}
