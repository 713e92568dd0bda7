package sched

import (
	"math"
	"strings"
	"testing"

	"github.com/imgpipe/imgpipe/stages"
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
		err := tt.op.Check()
		if (err == nil) != (tt.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tt.wantErr)) {
			t.Errorf("%s: Check() = %v, want %q", tt.name, err, tt.wantErr)
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

// TestOpCheck is the kernels' view of Check: every limit they rely on.
func TestOpCheck(t *testing.T) {
	taps := stages.BlurTaps(1.5)
	asym := append([]uint32(nil), taps...)
	asym[0]++
	asym[len(asym)-2]-- // still sums to 16384
	heavy := append([]uint32(nil), taps...)
	heavy[len(heavy)/2]++
	tests := []struct {
		name string
		op   Op
		err  string
	}{
		{"grayscale", Op{Kind: OpGrayscale}, ""},
		{"transpose", Op{Kind: OpTranspose}, ""},
		{"histogram", Op{Kind: OpHistogram}, ""},
		{"blur 0.5", Op{Kind: OpBlur, Taps: stages.BlurTaps(0.5)}, ""},
		{"blur 32", Op{Kind: OpBlur, Taps: stages.BlurTaps(32)}, ""},
		{"blur no taps", Op{Kind: OpBlur}, "0 taps"},
		{"blur one tap", Op{Kind: OpBlur, Taps: []uint32{16384}}, "1 taps"},
		{"blur even taps", Op{Kind: OpBlur, Taps: []uint32{8192, 8192}}, "2 taps"},
		{"blur too long", Op{Kind: OpBlur, Taps: make([]uint32, MaxBlurTaps+2)}, "195 taps"},
		{"blur asymmetric", Op{Kind: OpBlur, Taps: asym}, "not symmetric"},
		{"blur bad sum", Op{Kind: OpBlur, Taps: heavy}, "sum to 16385"},
		{"box 0", Op{Kind: OpBoxBlur}, ""},
		{"box 15", Op{Kind: OpBoxBlur, Radius: 15}, ""},
		{"box -1", Op{Kind: OpBoxBlur, Radius: -1}, "radius -1"},
		{"box 16", Op{Kind: OpBoxBlur, Radius: 16}, "radius 16"},
		{"unknown", Op{Kind: 99}, "unknown op kind 99"},
		{"zero", Op{}, "unknown op kind 0"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.op.Check()
			switch {
			case tc.err == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tc.err != "" && err == nil:
				t.Fatalf("no error, want one containing %q", tc.err)
			case tc.err != "" && !strings.Contains(err.Error(), tc.err):
				t.Fatalf("error %q does not contain %q", err, tc.err)
			}
		})
	}
}

func TestOutShapeTable(t *testing.T) {
	blur := Op{Kind: OpBlur, Taps: stages.BlurTaps(1)}
	tests := []struct {
		op      Op
		w, h, c int
		want    [3]int
	}{
		{Op{Kind: OpGrayscale}, 7, 5, 3, [3]int{7, 5, 1}},
		{Op{Kind: OpGrayscale}, 7, 5, 1, [3]int{7, 5, 1}},
		{Op{Kind: OpTranspose}, 7, 5, 3, [3]int{5, 7, 3}},
		{Op{Kind: OpTranspose}, 1, 9, 1, [3]int{9, 1, 1}},
		{blur, 7, 5, 3, [3]int{7, 5, 3}},
		{Op{Kind: OpBoxBlur, Radius: 2}, 7, 5, 1, [3]int{7, 5, 1}},
		{Op{Kind: OpHistogram}, 7, 5, 3, [3]int{7, 5, 3}},
	}
	for _, tc := range tests {
		out := tc.op.OutShape(Shape{W: tc.w, H: tc.h, C: tc.c})
		if got := [3]int{out.W, out.H, out.C}; got != tc.want {
			t.Errorf("%v.OutShape(%d,%d,%d) = %v, want %v", tc.op.Kind, tc.w, tc.h, tc.c, got, tc.want)
		}
	}
}
