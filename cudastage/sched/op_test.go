package sched

import (
	"math"
	"strings"
	"testing"
)

func TestBlurOp(t *testing.T) {
	tests := []struct {
		sigma   float64
		wantErr string
		taps    int
	}{
		{sigma: 1.5, taps: 2*5 + 1},
		{sigma: 0.1, taps: 3},
		{sigma: 32, taps: 2*96 + 1},
		{sigma: 0, wantErr: "out of range"},
		{sigma: -1, wantErr: "out of range"},
		{sigma: 32.01, wantErr: "out of range"},
		{sigma: math.NaN(), wantErr: "out of range"},
		{sigma: math.Inf(1), wantErr: "out of range"},
	}
	for _, tt := range tests {
		op, err := BlurOp(tt.sigma)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("BlurOp(%v) error %v, want %q", tt.sigma, err, tt.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("BlurOp(%v): %v", tt.sigma, err)
			continue
		}
		if len(op.Taps) != tt.taps || op.Kind != OpBlur {
			t.Errorf("BlurOp(%v) = %d taps kind %v, want %d taps blur", tt.sigma, len(op.Taps), op.Kind, tt.taps)
		}
	}
}

func TestBoxBlurOp(t *testing.T) {
	for _, r := range []int{0, 1, 15} {
		if op, err := BoxBlurOp(r); err != nil || op.Radius != r {
			t.Errorf("BoxBlurOp(%d) = %+v, %v", r, op, err)
		}
	}
	for _, r := range []int{-1, 16, 1000} {
		if _, err := BoxBlurOp(r); err == nil {
			t.Errorf("BoxBlurOp(%d) accepted", r)
		}
	}
}

func TestOpValidate(t *testing.T) {
	good := mustBlur(t, 1)
	asym := append([]uint32(nil), good.Taps...)
	asym[0]++
	asym[len(asym)-2]--
	tests := []struct {
		name    string
		op      Op
		wantErr string
	}{
		{"grayscale", GrayscaleOp(), ""},
		{"blur", good, ""},
		{"blur no taps", Op{Kind: OpBlur}, "taps"},
		{"blur even taps", Op{Kind: OpBlur, Taps: []uint32{8192, 8192}}, "taps"},
		{"blur bad sum", Op{Kind: OpBlur, Taps: []uint32{1, 2, 1}}, "sum"},
		{"blur asymmetric", Op{Kind: OpBlur, Taps: asym}, "symmetric"},
		{"box radius", Op{Kind: OpBoxBlur, Radius: 16}, "radius"},
		{"unknown", Op{Kind: 99}, "unknown"},
		{"zero", Op{}, "unknown"},
	}
	for _, tt := range tests {
		err := tt.op.validate()
		if (err == nil) != (tt.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tt.wantErr)) {
			t.Errorf("%s: validate() = %v, want %q", tt.name, err, tt.wantErr)
		}
	}
	if err := checkOps(nil); err == nil {
		t.Error("checkOps(nil) accepted an empty segment")
	}
	err := checkOps([]Op{GrayscaleOp(), {Kind: OpBoxBlur, Radius: -2}, {}})
	if err == nil || !strings.Contains(err.Error(), "op 2:") || !strings.Contains(err.Error(), "op 3:") {
		t.Errorf("checkOps reports %v, want both bad ops named", err)
	}
}

func TestOutShape(t *testing.T) {
	in := Shape{W: 7, H: 3, C: 3}
	tests := []struct {
		op   Op
		want Shape
	}{
		{GrayscaleOp(), Shape{7, 3, 1}},
		{TransposeOp(), Shape{3, 7, 3}},
		{HistogramOp(), in},
		{mustBlur(t, 2), in},
		{mustBox(t, 3), in},
	}
	for _, tt := range tests {
		if got := tt.op.OutShape(in); got != tt.want {
			t.Errorf("%v.OutShape(%v) = %v, want %v", tt.op, in, got, tt.want)
		}
	}
	if got := GrayscaleOp().OutShape(Shape{5, 4, 1}); got != (Shape{5, 4, 1}) {
		t.Errorf("grayscale of gray = %v", got)
	}
}

func TestSegmentString(t *testing.T) {
	ops := []Op{GrayscaleOp(), mustBlur(t, 1.5), mustBox(t, 2), TransposeOp(), HistogramOp()}
	want := "grayscale | blur sigma=1.5 | boxblur radius=2 | transpose | histogram"
	if got := SegmentString(ops); got != want {
		t.Errorf("SegmentString = %q, want %q", got, want)
	}
	if got := OpKind(42).String(); got != "op(42)" {
		t.Errorf("OpKind(42) = %q", got)
	}
}

func TestShapeCheck(t *testing.T) {
	tests := []struct {
		s  Shape
		ok bool
	}{
		{Shape{1, 1, 1}, true},
		{Shape{1920, 1080, 3}, true},
		{Shape{0, 1, 3}, false},
		{Shape{1, -1, 3}, false},
		{Shape{1, 1, 2}, false},
		{Shape{1, 1, 4}, false},
		{Shape{MaxSide + 1, 1, 1}, false},
	}
	for _, tt := range tests {
		if err := tt.s.check(); (err == nil) != tt.ok {
			t.Errorf("%v.check() = %v, want ok=%v", tt.s, err, tt.ok)
		}
	}
}
