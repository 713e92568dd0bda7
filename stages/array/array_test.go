package array

import (
	"errors"
	"math"
	"testing"
)

var (
	nan = NaN
	// odd is a NaN with a payload and the sign set, which no result may keep.
	odd  = math.Float32frombits(0xFFA00001)
	inf  = float32(math.Inf(1))
	zero = float32(0)
	negz = float32(math.Copysign(0, -1))
)

// same compares bits, so that -0 differs from +0 and a NaN equals only the same NaN.
func same(a, b float32) bool { return math.Float32bits(a) == math.Float32bits(b) }

// treeRef is SumOrder written out again the numpy way, recursively over a padded-free tree:
// the reduction of a block of n is the sum of its halves' strided pairs.
func treeRef(x []float32) float32 {
	if len(x) == 0 {
		return 0
	}
	for len(x) > 1 {
		var next []float32
		for lo := 0; lo < len(x); lo += Block {
			s := append([]float32(nil), x[lo:min(len(x), lo+Block)]...)
			for stride := Block / 2; stride >= 1; stride /= 2 {
				for i := range s {
					if i < stride && i+stride < len(s) {
						s[i] = s[i] + s[i+stride]
					}
				}
			}
			next = append(next, s[0])
		}
		x = next
	}
	return x[0]
}

func TestElementwise(t *testing.T) {
	tests := []struct {
		name string
		op   func([]float32)
		in   []float32
		want []float32
	}{
		{"scale", func(x []float32) { Scale(x, 2.5) }, []float32{1, -2, 0.1}, []float32{2.5, -5, 0.25}},
		{"scale rounds once", func(x []float32) { Scale(x, 3) }, []float32{0.1}, []float32{float32(0.1) * 3}},
		{"scale overflow", func(x []float32) { Scale(x, 1e30) }, []float32{1e30, -1e30}, []float32{inf, -inf}},
		{"scale nan inf", func(x []float32) { Scale(x, 0) }, []float32{nan, inf, -1}, []float32{nan, nan, negz}},
		{"scale nan payload", func(x []float32) { Scale(x, 1) }, []float32{odd}, []float32{nan}},
		{"add nan payload", func(x []float32) { Add(x, 0) }, []float32{odd}, []float32{nan}},
		{"add", func(x []float32) { Add(x, 1) }, []float32{1, 16777216, -1}, []float32{2, 16777216, 0}},
		{"add inf", func(x []float32) { Add(x, inf) }, []float32{-inf, 0}, []float32{nan, inf}},
		{"empty", func(x []float32) { Add(x, 1) }, nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			x := append([]float32(nil), tt.in...)
			tt.op(x)
			for i := range tt.want {
				if !same(x[i], tt.want[i]) {
					t.Errorf("element %d = %v (%#x), want %v", i, x[i], math.Float32bits(x[i]), tt.want[i])
				}
			}
		})
	}
}

func TestSum(t *testing.T) {
	ramp := func(n int) []float32 {
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(i%97)*0.013 - 0.5 + float32(i)*1e-3
		}
		return x
	}
	tests := []struct {
		name string
		in   []float32
		want float32 // NaN: compare with treeRef
	}{
		{"empty", nil, 0},
		{"one", []float32{-3.5}, -3.5},
		{"tree not sequential", []float32{1e8, 1, -1e8, 1}, 2}, // sequential float32 gives 1
		{"nan", []float32{1, nan, 2}, nan},
		{"nan payload", []float32{1, odd, 2}, nan},
		{"inf", []float32{inf, 1}, inf},
		{"inf minus inf", []float32{inf, -inf}, nan},
		{"negative zeros", []float32{negz, negz}, negz},
		{"block", ramp(Block), 0},
		{"block plus one", ramp(Block + 1), 0},
		{"three levels", ramp(Block*Block + 3), 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Sum(tt.in)
			want := tt.want
			if len(tt.in) >= Block {
				want = treeRef(tt.in)
			}
			if !same(got, want) {
				t.Errorf("Sum = %v (%#x), want %v (%#x)", got, math.Float32bits(got), want, math.Float32bits(want))
			}
		})
	}
}

func TestMinMax(t *testing.T) {
	tests := []struct {
		name     string
		in       []float32
		min, max float32
		err      error
	}{
		{"empty", nil, 0, 0, ErrEmpty},
		{"plain", []float32{3, -1, 2}, -1, 3, nil},
		{"zeros", []float32{zero, negz, zero}, negz, zero, nil},
		{"zeros other way", []float32{negz, zero, negz}, negz, zero, nil},
		{"inf", []float32{inf, -inf, 0}, -inf, inf, nil},
		{"nan first", []float32{nan, 1}, nan, nan, nil},
		{"nan last", []float32{1, -5, nan}, nan, nan, nil},
		{"nan payload", []float32{odd, 1}, nan, nan, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lo, err := Min(tt.in)
			if !errors.Is(err, tt.err) || (err == nil && !same(lo, tt.min)) {
				t.Errorf("Min = %v, %v; want %v, %v", lo, err, tt.min, tt.err)
			}
			hi, err := Max(tt.in)
			if !errors.Is(err, tt.err) || (err == nil && !same(hi, tt.max)) {
				t.Errorf("Max = %v, %v; want %v, %v", hi, err, tt.max, tt.err)
			}
		})
	}
}

func BenchmarkSum(b *testing.B) {
	x := make([]float32, 1<<20)
	for i := range x {
		x[i] = float32(i) * 1e-6
	}
	b.SetBytes(int64(4 * len(x)))
	for b.Loop() {
		Sum(x)
	}
}
