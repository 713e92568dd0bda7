package sourcemodule

import (
	"errors"
	"fmt"
	"testing"

	"github.com/imgpipe/imgpipe/cudastage/cutest"
	"github.com/imgpipe/imgpipe/cudastage/nvrtc"
	"github.com/imgpipe/imgpipe/cudastage/userkernel"
	"github.com/imgpipe/imgpipe/pipeline"
	"github.com/imgpipe/imgpipe/pipeline/gpu"
	"github.com/imgpipe/imgpipe/stages"
)

// GPU tests: the examples' flows with numbers checked, on odd sizes, and a
// pipeline stage built from a compiled kernel against a CPU equivalent.

const gpuDoubleSrc = `extern "C" __global__ void double_array(float *a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) a[i] *= 2.0f;
}
extern "C" __global__ void axpb(const float *x, float *y, float a, float b, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + b;
}
`

func openGPU(t *testing.T) *Context {
	t.Helper()
	ord := cutest.Require(t)
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	c, err := Open(ord, Config{HostBytes: 64 << 20, DeviceBytes: 64 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Error(err)
		}
	})
	return c
}

// runFloats compiles fn of src, fills one host buffer per input with fill(buffer, index),
// uploads them, launches over n elements with args(dev), downloads buffer
// out and returns it.
func runFloats(t *testing.T, c *Context, fn string, n, buffers, out int, fill func(buf, i int) float32, args func(dev []*DeviceBuffer) []Arg) []float32 {
	t.Helper()
	mod, err := c.Compile("test.cu", gpuDoubleSrc)
	if err != nil {
		t.Fatal(err)
	}
	f, err := mod.Function(fn)
	if err != nil {
		t.Fatal(err)
	}
	host := make([]*HostBuffer, buffers)
	dev := make([]*DeviceBuffer, buffers)
	for b := range buffers {
		if host[b], err = c.HostAlloc(t.Context(), 4*n); err != nil {
			t.Fatal(err)
		}
		defer host[b].Free()
		if dev[b], err = c.Alloc(4 * n); err != nil {
			t.Fatal(err)
		}
		defer dev[b].Free()
		vals := host[b].Float32s()
		for i := range vals {
			vals[i] = fill(b, i)
		}
		if err := c.CopyHtoD(dev[b], host[b]); err != nil {
			t.Fatal(err)
		}
	}
	const block = 128
	if err := f.Launch([3]uint32{uint32((n + block - 1) / block), 1, 1}, [3]uint32{block, 1, 1}, args(dev)...); err != nil {
		t.Fatal(err)
	}
	if err := c.CopyDtoH(host[out], dev[out]); err != nil {
		t.Fatal(err)
	}
	if err := c.Synchronize(); err != nil {
		t.Fatal(err)
	}
	return append([]float32(nil), host[out].Float32s()...)
}

func TestGPUDoubleArray(t *testing.T) {
	c := openGPU(t)
	for _, n := range []int{1, 127, 1000, 100003} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			got := runFloats(t, c, "double_array", n, 1, 0,
				func(_, i int) float32 { return float32(i) - 0.25 },
				func(d []*DeviceBuffer) []Arg { return []Arg{Ptr(d[0]), Int(int32(n))} })
			for i, v := range got {
				if want := 2 * (float32(i) - 0.25); v != want {
					t.Fatalf("a[%d] = %v, want %v", i, v, want)
				}
			}
		})
	}
}

// TestGPUTypedArgs passes a float, a float and an int after two pointers;
// y = a·x + b is exact in float32 for these values (a fused multiply-add
// gives the same bits, as a·x is exact).
func TestGPUTypedArgs(t *testing.T) {
	c := openGPU(t)
	const n = 777
	got := runFloats(t, c, "axpb", n, 2, 1,
		func(b, i int) float32 { return float32(i * (1 - b)) },
		func(d []*DeviceBuffer) []Arg { return []Arg{Ptr(d[0]), Ptr(d[1]), Float(0.5), Float(-3), Int(n)} })
	for i, v := range got {
		if want := 0.5*float32(i) - 3; v != want {
			t.Fatalf("y[%d] = %v, want %v", i, v, want)
		}
	}
}

func TestGPUCompileAndLookupErrors(t *testing.T) {
	c := openGPU(t)
	_, err := c.Compile("bad.cu", "extern \"C\" __global__ void k() {\n  int x = ;\n}\n")
	var ce *nvrtc.CompileError
	if !errors.As(err, &ce) || ce.File != "bad.cu" || ce.Line != 2 {
		t.Errorf("compile error: %v", err)
	}
	mod, err := c.Compile("test.cu", gpuDoubleSrc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := mod.Function("missing"); err == nil {
		t.Error("a missing function was found")
	}
	f, err := mod.Function("double_array")
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Launch([3]uint32{1, 1, 1}, [3]uint32{2048, 1, 1}); err == nil {
		t.Error("a block of 2048 threads was accepted")
	}
	if _, err := c.Alloc(128 << 20); err == nil {
		t.Error("an allocation over the device budget succeeded")
	}
	if _, err := c.HostAlloc(t.Context(), 128<<20); err == nil {
		t.Error("an allocation over the host budget succeeded")
	}
}

// A pipeline stage built from a compiled kernel runs on the Context's GPU
// and equals the CPU's inversion byte for byte, on odd sizes.
func TestGPUStageFromModule(t *testing.T) {
	c := openGPU(t)
	mod, err := c.Compile("invert.cu", invertSrc)
	if err != nil {
		t.Fatal(err)
	}
	var inputs []pipeline.Input
	var want []*stages.Image
	for i, s := range []stages.Shape{{W: 1, H: 1, C: 3}, {W: 17, H: 5, C: 3}, {W: 64, H: 33, C: 1}} {
		m := stages.NewImage(s.W, s.H, s.C)
		inv := stages.NewImage(s.W, s.H, s.C)
		for y := range s.H {
			for x := range m.Row(y) {
				m.Row(y)[x] = byte(7*x + 13*y + i)
				inv.Row(y)[x] = 255 - m.Row(y)[x]
			}
		}
		inputs = append(inputs, pipeline.Input{Name: fmt.Sprintf("%d.raw", i), Image: m})
		want = append(want, inv)
	}
	p := pipeline.New().Decode().Then("kernel", mod.StageArgs("invert", userkernel.OutSame)).
		WithOptions(pipeline.Options{Backend: &gpu.Options{Device: c.Device()}})
	sink := pipeline.Collect()
	if _, err := p.Run(t.Context(), pipeline.Inputs(inputs...), sink); err != nil {
		t.Fatal(err)
	}
	if len(sink.Results) != len(want) {
		t.Fatalf("%d results, want %d", len(sink.Results), len(want))
	}
	for i, r := range sink.Results {
		if r.Err != nil {
			t.Fatalf("%s: %v", r.Input, r.Err)
		}
		for y := range want[i].H {
			if string(r.Image.Row(y)) != string(want[i].Row(y)) {
				t.Fatalf("%s row %d differs", r.Input, y)
			}
		}
	}
}
