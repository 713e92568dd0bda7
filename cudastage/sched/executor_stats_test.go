package sched_test

import (
	"context"
	"testing"
	"time"

	. "github.com/imgpipe/imgpipe/cudastage/sched"
	"github.com/imgpipe/imgpipe/cudastage/sched/schedtest"
)

// TestStatsFromExecutor checks the totals against what the fake was asked
// to do: device-timed phases are positive, the wall covers every phase's
// busiest engine, and ResetStats zeroes the batch totals.
func TestStatsFromExecutor(t *testing.T) {
	ops := []Op{GrayscaleOp(), TransposeOp(), HistogramOp()}
	dev := schedtest.NewFake(schedtest.FakeConfig{H2DRate: 20e6, D2HRate: 20e6})
	e := startExec(t, context.Background(), dev, Config{Ops: ops, Streams: 3, Slots: 5, Batch: 4, SlotBytes: 40000})
	imgs := mixedImages(2, 32)
	go pushAll(context.Background(), e, imgs, 1)
	for r := range e.Results() {
		r.Release()
	}
	st := e.Stats()
	var px int64
	for _, m := range imgs {
		px += int64(m.W * m.H)
	}
	if st.Images != 32 || st.Pixels != px || st.Batches < 8 {
		t.Errorf("%d images, %d pixels, %d batches; want 32, %d, at least 8", st.Images, st.Pixels, st.Batches, px)
	}
	if st.H2D <= 0 || st.Kernels <= 0 || st.D2H <= 0 {
		t.Errorf("phase totals %v %v %v, want all positive", st.H2D, st.Kernels, st.D2H)
	}
	if o := st.Overlap(); o < 1 {
		t.Errorf("overlap efficiency %v < 1: the wall is shorter than one engine's work", o)
	}
	var sum time.Duration
	for _, op := range st.Ops {
		sum += op.Total
	}
	if sum != st.Kernels {
		t.Errorf("op totals sum to %v, kernels %v", sum, st.Kernels)
	}
	if st.HostBytes <= 0 || st.DeviceBytes <= 0 || st.Streams != 3 || st.Slots != 5 {
		t.Errorf("config stats %+v", st)
	}
	e.ResetStats()
	if r := e.Stats(); r.Batches != 0 || r.H2D != 0 || r.Ops[0].Total != 0 || r.Streams != 3 || r.HostBytes != st.HostBytes {
		t.Errorf("after ResetStats: %+v", r)
	}
}
