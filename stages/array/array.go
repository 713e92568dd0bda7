// Package array holds the CPU reference implementations of imgpipe's float32 array stages
// (scale, add, sum, min, max) over the data of a .npy array in C order. Every result is
// defined to the bit, so that a GPU kernel can reproduce it:
//
//   - Scale and Add are elementwise IEEE single precision: x*f and x+v rounded to float32
//     once, exactly as Go computes them on float32 operands (no fused operations).
//   - Sum adds in the fixed order SumOrder documents, so it does not depend on threads.
//   - Min and Max use a total order in which NaN wins and -0 is below +0, so they do not
//     depend on the order either.
//
// NaN and ±Inf are ordinary inputs: they propagate as IEEE arithmetic says (Inf + -Inf is
// NaN; a sum holding a NaN is NaN; min and max of an array holding a NaN are NaN, like
// numpy.min and numpy.max). Every NaN a function returns or writes is NaN, the quiet NaN
// 0x7FC00000 (NumPy's float32 nan): IEEE leaves a result's NaN payload open, x86 keeps an
// operand's while NVIDIA GPUs write 0x7FFFFFFF, so only a fixed NaN gives the same bits on
// every machine.
package array

import (
	"errors"
	"math"
)

// Block is the number of elements that one step of Sum reduces to one partial sum: a GPU
// reduces one block of Block elements per thread block in shared memory.
const Block = 256

// NaN is the quiet NaN every function here gives for a NaN result: the bits 0x7FC00000.
var NaN = math.Float32frombits(0x7FC00000)

// canon returns v, or NaN when v is a NaN of any payload.
func canon(v float32) float32 {
	if v != v {
		return NaN
	}
	return v
}

// ErrEmpty is the error of Min and Max of an array without elements (numpy raises one too).
var ErrEmpty = errors.New("array has no elements")

// Scale sets x[i] = x[i]*f for every i, each product rounded to float32 (a NaN product is
// NaN).
func Scale(x []float32, f float32) {
	for i, v := range x {
		x[i] = canon(v * f)
	}
}

// Add sets x[i] = x[i]+v for every i, each sum rounded to float32 (a NaN sum is NaN).
func Add(x []float32, v float32) {
	for i, e := range x {
		x[i] = canon(e + v)
	}
}

// Sum returns the float32 sum of x in the order SumOrder documents (NaN when it is a NaN);
// 0 for no elements.
//
// SumOrder: x is cut into blocks of Block consecutive elements (the last may be shorter).
// Each block of n elements is reduced as a tree with halving strides, as a GPU thread
// block does in shared memory: for stride = Block/2, Block/4, ..., 1, in that order,
// s[i] = s[i] + s[i+stride] for every i < stride with i+stride < n; s[0] is the block's
// sum. The block sums, in block order, form a new array that is reduced the same way, and
// so on until one value remains. Every addition is rounded to float32.
func Sum(x []float32) float32 {
	if len(x) == 0 {
		return 0
	}
	var buf [Block]float32
	level := x
	for {
		partial := make([]float32, (len(level)+Block-1)/Block)
		for b := range partial {
			blk := level[b*Block : min(len(level), (b+1)*Block)]
			partial[b] = blockSum(&buf, blk)
		}
		if len(partial) == 1 {
			return canon(partial[0])
		}
		level = partial
	}
}

// blockSum reduces at most Block elements as Sum's tree does, in buf.
func blockSum(buf *[Block]float32, blk []float32) float32 {
	n := copy(buf[:], blk)
	for stride := Block / 2; stride > 0; stride /= 2 {
		for i := 0; i < stride && i+stride < n; i++ {
			buf[i] += buf[i+stride]
		}
	}
	return buf[0]
}

// Min returns the least element of x in the total order where -0 < +0 and a NaN is below
// everything (so the minimum of an array holding a NaN is NaN), or ErrEmpty.
func Min(x []float32) (float32, error) { return extreme(x, Less) }

// Max returns the greatest element of x in the total order where -0 < +0 and a NaN is
// above everything (so the maximum of an array holding a NaN is NaN), or ErrEmpty.
func Max(x []float32) (float32, error) {
	return extreme(x, func(a, b float32) bool { return Less(b, a) })
}

// Less reports whether a is below b in the order of Min and Max among numbers: a < b, or
// a is -0 and b is +0. Since the order is total there, Min and Max do not depend on the
// order of the elements, which lets a GPU reduce them in any tree.
func Less(a, b float32) bool {
	return a < b || (a == b && math.Signbit(float64(a)) && !math.Signbit(float64(b)))
}

// extreme returns the element that beats every other by better, or NaN when x holds one.
func extreme(x []float32, better func(a, b float32) bool) (float32, error) {
	if len(x) == 0 {
		return 0, ErrEmpty
	}
	best := x[0]
	for _, v := range x {
		if v != v {
			return NaN, nil
		}
		if better(v, best) {
			best = v
		}
	}
	return best, nil
}

// ScaleArgs are the scale array stage's launch arguments: the factor, rounded to float32
// once, as the CPU implementation rounds it.
type ScaleArgs struct{ Factor float32 }

// LaunchStage names the stage whose GPU launcher reads these arguments (sched.LaunchArgs).
func (ScaleArgs) LaunchStage() string { return "scale" }

// AddArgs are the add array stage's launch arguments: the addend, rounded to float32 once.
type AddArgs struct{ Value float32 }

// LaunchStage names the stage whose GPU launcher reads these arguments (sched.LaunchArgs).
func (AddArgs) LaunchStage() string { return "add" }
