package sched

import (
	"errors"
	"strings"
	"testing"
)

// refusing is a device that runs no op called "blur" (checkOps asks it
// nothing else).
type refusing struct{ Device }

func (r refusing) CheckOp(op Op) error {
	if op.Name == "blur" {
		return errors.New("no blur kernel here")
	}
	return nil
}

func TestCheckOps(t *testing.T) {
	dev := refusing{}
	tests := []struct {
		name string
		ops  []Op
		want []string // substrings of the error; none: valid
	}{
		{"valid", []Op{GrayscaleOp(), TransposeOp(), HistogramOp()}, nil},
		{"empty", nil, []string{"no ops"}},
		{"no name", []Op{{CPU: GrayscaleOp().CPU}}, []string{"op 1: op without a name"}},
		{"no CPU: the device decides", []Op{{Name: "x"}}, nil},
		{"device refuses", []Op{GrayscaleOp(), MustBlurOp(t, 1)}, []string{"op 2: no blur kernel here"}},
		{"every problem", []Op{{}, GrayscaleOp(), MustBlurOp(t, 1)}, []string{"op 1:", "op 3:"}},
	}
	for _, tt := range tests {
		err := checkOps(dev, tt.ops)
		if len(tt.want) == 0 {
			if err != nil {
				t.Errorf("%s: %v", tt.name, err)
			}
			continue
		}
		for _, w := range tt.want {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %v, want it to contain %q", tt.name, err, w)
			}
		}
	}
}

func TestOutShape(t *testing.T) {
	in := Shape{W: 7, H: 3, C: 3}
	tests := []struct {
		op   Op
		in   Shape
		want Shape
	}{
		{GrayscaleOp(), in, Shape{W: 7, H: 3, C: 1}},
		{GrayscaleOp(), Shape{W: 5, H: 4, C: 1}, Shape{W: 5, H: 4, C: 1}},
		{TransposeOp(), in, Shape{W: 3, H: 7, C: 3}},
		{TransposeOp(), Shape{W: 1, H: 9, C: 1}, Shape{W: 9, H: 1, C: 1}},
		{HistogramOp(), in, in},
		{MustBlurOp(t, 2), in, in}, // no Out: same shape
		{MustBoxBlurOp(t, 3), in, in},
		// A histogram op passes the image through whatever Out says.
		{Op{Name: "h", Hist: true, Out: TransposeOp().Out}, in, in},
	}
	for _, tt := range tests {
		if got := tt.op.OutShape(tt.in); got != tt.want {
			t.Errorf("%v.OutShape(%v) = %v, want %v", tt.op, tt.in, got, tt.want)
		}
	}
}

func TestSegmentString(t *testing.T) {
	ops := []Op{GrayscaleOp(), MustBlurOp(t, 1.5), MustBoxBlurOp(t, 2), TransposeOp(), HistogramOp(), {Name: "bare"}}
	want := "grayscale | blur sigma=1.5 | boxblur radius=2 | transpose | histogram | bare"
	if got := SegmentString(ops); got != want {
		t.Errorf("SegmentString = %q, want %q", got, want)
	}
}

func TestShapeCheck(t *testing.T) {
	tests := []struct {
		s  Shape
		ok bool
	}{
		{Shape{W: 1, H: 1, C: 1}, true},
		{Shape{W: 1920, H: 1080, C: 3}, true},
		{Shape{W: 0, H: 1, C: 3}, false},
		{Shape{W: 1, H: -1, C: 3}, false},
		{Shape{W: 1, H: 1, C: 2}, false},
		{Shape{W: 1, H: 1, C: 4}, false},
		{Shape{W: MaxSide + 1, H: 1, C: 1}, false},
	}
	for _, tt := range tests {
		if err := CheckShape(tt.s); (err == nil) != tt.ok {
			t.Errorf("CheckShape(%v) = %v, want ok=%v", tt.s, err, tt.ok)
		}
	}
}
