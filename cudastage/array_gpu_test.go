package cudastage

import (
	"context"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/imgpipe/imgpipe/cudastage/cu"
	"github.com/imgpipe/imgpipe/cudastage/sched"
	"github.com/imgpipe/imgpipe/cudastage/userkernel"
	"github.com/imgpipe/imgpipe/stages/array"
)

// GPU tests of the array stages: kernels/array.cu and a user kernel with the array
// calling convention, through the executor on the real device, against stages/array bit
// for bit.

// gpuArrayShapes are odd shapes: 0-d, one element, either side of a block and of a
// second tree level, three axes, a million elements.
var gpuArrayShapes = [][]int{{}, {1}, {255}, {256}, {257}, {3, 5, 7}, {65535}, {65537}, {4097, 3}, {1000, 1000}, {1, 1, 2}}

// randomArray is n random floats over many magnitudes; with specials, NaNs (of several
// payloads), ±Inf, ±0 and subnormals among them.
func randomArray(rng *rand.Rand, n int, specials bool) []float32 {
	odd := []float32{float32(math.NaN()), math.Float32frombits(0xFFA00001), float32(math.Inf(1)), float32(math.Inf(-1)),
		0, float32(math.Copysign(0, -1)), 1e-45, -2e-39}
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(rng.NormFloat64() * math.Pow(10, float64(rng.IntN(12)-6)))
		if specials && rng.IntN(2000) == 0 {
			x[i] = odd[rng.IntN(len(odd))]
		}
	}
	return x
}

// arrayResult is an array's final elements and reduction values.
type arrayResult struct {
	data   []float32
	values []float32
}

// runArrays pushes arrays of the given axes through an executor of ops on d and returns
// each one's result, in order.
func runArrays(t *testing.T, d sched.Device, ops []sched.Op, shapes [][]int, data [][]float32) []arrayResult {
	t.Helper()
	e, err := sched.New(context.Background(), d, sched.Config{Ops: ops, Streams: 2, Slots: 4, Batch: 3, SlotBytes: 8 << 20, Linger: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	go func() {
		for i, dims := range shapes {
			r, err := e.ReserveArray(context.Background(), dims, i)
			if err != nil {
				t.Error(err)
				break
			}
			for j, v := range data[i] {
				binary.LittleEndian.PutUint32(r.Image().Pix[4*j:], math.Float32bits(v))
			}
			r.Commit()
		}
		e.CloseInput()
	}()
	out := make([]arrayResult, len(shapes))
	for r := range e.Results() {
		i := r.Tag.(int)
		x := make([]float32, r.Image.W)
		for j := range x {
			x[j] = math.Float32frombits(binary.LittleEndian.Uint32(r.Image.Pix[4*j:]))
		}
		out[i] = arrayResult{data: x, values: append([]float32{}, r.Values...)}
		r.Release()
	}
	if err := e.Wait(); err != nil {
		t.Fatal(err)
	}
	return out
}

// compareArrays reports every element and value of got that differs from want in its bits.
func compareArrays(t *testing.T, shapes [][]int, got, want []arrayResult) {
	t.Helper()
	for i := range want {
		if len(got[i].data) != len(want[i].data) || len(got[i].values) != len(want[i].values) {
			t.Errorf("array %v: %d elements and values %v, want %d and %v", shapes[i], len(got[i].data), got[i].values, len(want[i].data), want[i].values)
			continue
		}
		bad := 0
		for j := range want[i].data {
			if g, w := got[i].data[j], want[i].data[j]; math.Float32bits(g) != math.Float32bits(w) {
				if bad++; bad <= 3 {
					t.Errorf("array %v element %d: GPU %v (%#x), CPU %v (%#x)", shapes[i], j, g, math.Float32bits(g), w, math.Float32bits(w))
				}
			}
		}
		for k, w := range want[i].values {
			if g := got[i].values[k]; math.Float32bits(g) != math.Float32bits(w) {
				t.Errorf("array %v value %d: GPU %v (%#x), CPU %v (%#x)", shapes[i], k, g, math.Float32bits(g), w, math.Float32bits(w))
			}
		}
	}
}

func elements(dims []int) int {
	n := 1
	for _, d := range dims {
		n *= d
	}
	return n
}

// The built-in array stages on the GPU give stages/array's bits: elements, NaNs and
// signed zeros included, and the sum in SumOrder's tree.
func TestGPUArrayStagesMatchCPU(t *testing.T) {
	d := exDevice(t)
	rng := rand.New(rand.NewPCG(7, 8))
	// A chain holds each reduction once: the sum of the data as drawn, then the whole
	// chain.
	raw := arrayOpsOf("sum")
	ops := arrayOpsOf("scale factor=1.7 | add value=-0.3 | sum | min | max")
	var data [][]float32
	var wantRaw, want []arrayResult
	for i, dims := range gpuArrayShapes {
		x := randomArray(rng, elements(dims), i%2 == 1)
		data = append(data, x)
		wantRaw = append(wantRaw, arrayResult{data: append([]float32{}, x...), values: []float32{array.Sum(x)}})
		y := append([]float32{}, x...)
		array.Scale(y, 1.7)
		array.Add(y, -0.3)
		lo, _ := array.Min(y)
		hi, _ := array.Max(y)
		want = append(want, arrayResult{data: y, values: []float32{array.Sum(y), lo, hi}})
	}
	compareArrays(t, gpuArrayShapes, runArrays(t, d, raw, gpuArrayShapes, data), wantRaw)
	compareArrays(t, gpuArrayShapes, runArrays(t, d, ops, gpuArrayShapes, data), want)
}

// userAxpb is y = a·x + b, rounded as two operations (no FMA), with float parameters
// a and b and an int parameter that checks ndim and the shape reach the kernel: where
// they disagree with n, the element is written as -1.
const userAxpb = `extern "C" __global__ void axpb(const float *in, float *out, long long n,
    int ndim, const long long *shape, float a, float b) {
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i >= n) return;
    long long m = 1;
    for (int k = 0; k < ndim; k++) m *= shape[k];
    out[i] = m == n ? __fadd_rn(__fmul_rn(a, in[i]), b) : -1.0f;
}
`

func userArrayOp(name, src, fn string, args ...userkernel.Scalar) sched.Op {
	k := &userkernel.Kernel{File: name, Source: src, Fn: fn, Out: userkernel.OutSame, Params: args, Array: true}
	return sched.Op{Name: "kernel", Spec: "kernel src=" + name + " fn=" + fn, Array: true, Args: k}
}

// A user kernel with the array calling convention, followed by a built-in reduction,
// equals its CPU equivalent bit for bit.
func TestGPUUserArrayKernel(t *testing.T) {
	d := exDevice(t)
	rng := rand.New(rand.NewPCG(9, 10))
	ops := []sched.Op{userArrayOp("axpb.cu", userAxpb, "axpb", userkernel.Scalar{Float: true, F: 2.5}, userkernel.Scalar{Float: true, F: -1}),
		arrayOpsOf("sum")[0]}
	var data [][]float32
	var want []arrayResult
	for _, dims := range gpuArrayShapes {
		x := randomArray(rng, elements(dims), false)
		data = append(data, x)
		y := make([]float32, len(x))
		for j, v := range x {
			y[j] = float32(2.5*v) + -1 // the conversion rounds the product: no FMA
		}
		want = append(want, arrayResult{data: y, values: []float32{array.Sum(y)}})
	}
	compareArrays(t, gpuArrayShapes, runArrays(t, d, ops, gpuArrayShapes, data), want)
}

// envArrayFaultChild marks the child process of TestGPUUserArrayKernelFault.
const envArrayFaultChild = "IMGPIPE_TEST_ARRAY_FAULT"

// A user array kernel that faults is a sticky device error: the executor stops with it
// and delivers no result of the batch. (In a child process: the fault spoils the
// context for the rest of the process.)
func TestGPUUserArrayKernelFault(t *testing.T) {
	if os.Getenv(envArrayFaultChild) != "1" {
		requireGPU(t)
		cmd := exec.Command(os.Args[0], "-test.run=^TestGPUUserArrayKernelFault$", "-test.v")
		cmd.Env = append(os.Environ(), envArrayFaultChild+"=1")
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "--- PASS: TestGPUUserArrayKernelFault") {
			t.Fatalf("child: %v\n%s", err, out)
		}
		return
	}
	g := requireGPU(t)
	d := NewDevice(g)
	const wild = `extern "C" __global__ void wild(const float *in, float *out, long long n,
    int ndim, const long long *shape) { ((float *)0x10)[threadIdx.x] = 1; }
`
	e, err := sched.New(context.Background(), d, sched.Config{Ops: []sched.Op{userArrayOp("wild.cu", wild, "wild")},
		Streams: 1, Slots: 2, Batch: 2, SlotBytes: 1 << 16})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		r, err := e.ReserveArray(context.Background(), []int{100}, i)
		if err != nil {
			t.Fatal(err)
		}
		r.Commit()
	}
	e.CloseInput()
	for r := range e.Results() {
		t.Errorf("array %v came back from a faulting kernel", r.Tag)
		r.Release()
	}
	if err := e.Wait(); !cu.IsSticky(err) {
		t.Errorf("Wait = %v, want a sticky device error", err)
	}
}
