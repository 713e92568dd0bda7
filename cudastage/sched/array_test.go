package sched_test

import (
	"context"
	"encoding/binary"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	. "github.com/imgpipe/imgpipe/cudastage/sched"
	"github.com/imgpipe/imgpipe/cudastage/sched/schedtest"

	"github.com/imgpipe/imgpipe/stages"
)

// Array test ops over ArrayShape images: double every element, and two reductions.
var (
	doubleOp = Op{Name: "double", Array: true, CPU: func(dst, src *stages.Image, _ *[256]uint64) {
		for i := 0; i < len(src.Pix); i += 4 {
			binary.LittleEndian.PutUint32(dst.Pix[i:], math.Float32bits(2*elem(src.Pix, i/4)))
		}
	}}
	sumOp   = Op{Name: "sum", Array: true, Reduce: func(src *stages.Image) float32 { return fold(src, func(a, b float32) float32 { return a + b }) }}
	firstOp = Op{Name: "first", Array: true, Reduce: func(src *stages.Image) float32 { return elem(src.Pix, 0) }}
)

func elem(pix []byte, i int) float32 {
	return math.Float32frombits(binary.LittleEndian.Uint32(pix[4*i:]))
}

func fold(src *stages.Image, f func(a, b float32) float32) float32 {
	var v float32
	for i := range src.W {
		v = f(v, elem(src.Pix, i))
	}
	return v
}

// Arrays go through the executor as ArrayShape items: their elements come back doubled,
// and each reduction's value in Result.Values, in op order, with the reductions placed
// before, between and after the elementwise op.
func TestExecutorArrays(t *testing.T) {
	ops := []Op{sumOp, doubleOp, firstOp, doubleOp, sumOp}
	e := startExec(t, context.Background(), schedtest.NewFake(schedtest.FakeConfig{}),
		Config{Ops: ops, Streams: 2, Slots: 3, Batch: 3, SlotBytes: 4096, Linger: time.Millisecond})
	axes := [][]int{{}, {5}, {2, 3}, {300}, {1, 1, 7}}
	go func() {
		for k, dims := range axes {
			r, err := e.ReserveArray(context.Background(), dims, k)
			if err != nil {
				t.Error(err)
				return
			}
			m := r.Image()
			if m.H != 1 || m.C != ElemBytes || m.W != len(m.Pix)/4 {
				t.Errorf("array %v reserved as %dx%dx%d", dims, m.W, m.H, m.C)
			}
			for i := range m.W {
				binary.LittleEndian.PutUint32(m.Pix[4*i:], math.Float32bits(float32(i+k)))
			}
			r.Commit()
		}
		e.CloseInput()
	}()
	n := 0
	for r := range e.Results() {
		k := r.Tag.(int)
		w := r.Image.W
		var s float32
		for i := range w {
			s += float32(i + k)
		}
		want := []float32{s, 2 * float32(k), 4 * s}
		if len(r.Values) != 3 || r.Values[0] != want[0] || r.Values[1] != want[1] || r.Values[2] != want[2] {
			t.Errorf("array %d: values %v, want %v", k, r.Values, want)
		}
		if elem(r.Image.Pix, w-1) != 4*float32(w-1+k) {
			t.Errorf("array %d: last element %v", k, elem(r.Image.Pix, w-1))
		}
		r.Release()
		n++
	}
	if err := e.Wait(); err != nil || n != len(axes) {
		t.Fatalf("%d results, %v", n, err)
	}
}

// Arrays and images do not mix, and an array the device cannot take is refused at once:
// without elements, or too large (ErrTooLarge: the caller runs it on the CPU).
func TestReserveArrayErrors(t *testing.T) {
	ctx := context.Background()
	arrays := startExec(t, ctx, schedtest.NewFake(schedtest.FakeConfig{}),
		Config{Ops: []Op{doubleOp}, Streams: 1, Slots: 1, Batch: 2, SlotBytes: 1024})
	images := startExec(t, ctx, schedtest.NewFake(schedtest.FakeConfig{}),
		Config{Ops: []Op{GrayscaleOp()}, Streams: 1, Slots: 1, Batch: 2, SlotBytes: 1024})
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"image into arrays", func() error { _, err := arrays.Reserve(ctx, 2, 2, 3, nil); return err }(), "takes arrays"},
		{"array into images", func() error { _, err := images.ReserveArray(ctx, []int{4}, nil); return err }(), "takes images"},
		{"no elements", func() error { _, err := arrays.ReserveArray(ctx, []int{3, 0}, nil); return err }(), "without elements"},
		{"negative", func() error { _, err := arrays.ReserveArray(ctx, []int{-1}, nil); return err }(), "negative"},
		{"too many axes", func() error { _, err := arrays.ReserveArray(ctx, make([]int, MaxDims+1), nil); return err }(), "axes"},
		{"over the slot", func() error { _, err := arrays.ReserveArray(ctx, []int{257}, nil); return err }(), "too large"},
		{"over the limit", func() error { _, err := arrays.ReserveArray(ctx, []int{1 << 20, 1 << 20}, nil); return err }(), "too large"},
	}
	for _, tt := range tests {
		if tt.err == nil || !strings.Contains(tt.err.Error(), tt.want) {
			t.Errorf("%s: %v, want an error with %q", tt.name, tt.err, tt.want)
		}
		if tt.want == "too large" && !errors.Is(tt.err, ErrTooLarge) {
			t.Errorf("%s: %v is not ErrTooLarge", tt.name, tt.err)
		}
	}
	fake := schedtest.NewFake(schedtest.FakeConfig{})
	defer fake.Close()
	if _, err := New(ctx, fake, Config{Ops: []Op{doubleOp, GrayscaleOp()}, Streams: 1, Slots: 1, Batch: 1, SlotBytes: 1024}); err == nil ||
		!strings.Contains(err.Error(), "arrays or images, not both") {
		t.Errorf("a segment mixing arrays and images: %v", err)
	}
	if err := (Op{Name: "r", Reduce: sumOp.Reduce}).Check(); err == nil {
		t.Error("a reduction over images passes Check")
	}
	arrays.CloseInput()
	images.CloseInput()
}
