package kernelstage

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/imgpipe/imgpipe/cudastage/nvrtc"
	"github.com/imgpipe/imgpipe/cudastage/userkernel"
	"github.com/imgpipe/imgpipe/pipeline"
	"github.com/imgpipe/imgpipe/stages"
)

const invertCU = `extern "C" __global__ void invert(const unsigned char *in, unsigned char *out,
    int width, int height, int channels, int in_pitch, int out_pitch,
    int in_width, int in_height, int in_channels, float gain) {
    int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= width || y >= height) return;
    for (int c = 0; c < channels; c++)
        out[y * out_pitch + x * channels + c] = 255 - in[y * in_pitch + x * in_channels + c];
}
`

// withKernelEnv lets the kernel stage find CUDA 11's NVRTC too (as package nvrtc's tests
// do), keeps its cache in a temporary folder, and makes the GPU check answer gpuErr.
func withKernelEnv(t *testing.T, gpuErr error) {
	t.Helper()
	sonames := nvrtc.Spec.Sonames
	nvrtc.Spec.Sonames = append(sonames[:len(sonames):len(sonames)], "libnvrtc.so.11.2")
	old := gpuUsable
	gpuUsable = func() error { return gpuErr }
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	t.Cleanup(func() { nvrtc.Spec.Sonames, gpuUsable = sonames, old })
}

func kernelFile(t *testing.T, name, src string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func compileSpec(spec string) (*pipeline.Plan, error) {
	steps, err := pipeline.ParseSpec(spec)
	if err != nil {
		return nil, err
	}
	return pipeline.Compile(steps)
}

// Problems found without NVRTC: the stage's own parameters.
func TestKernelStageParams(t *testing.T) {
	withKernelEnv(t, nil)
	file := kernelFile(t, "invert.cu", invertCU)
	tests := []struct{ spec, want string }{
		{"decode | kernel fn=invert", "col 10: kernel: give the kernel as src=FILE or as source"},
		{"decode | kernel src=" + file + " source=x fn=invert", "one of them"},
		{"decode | kernel src=" + file + " fn=invert args=1,x", "kernel argument 2"},
		{"decode | kernel src=" + file + " fn=invert out=wide", "out=wide"},
		{"decode | kernel src=/nonexistent/k.cu fn=invert", "no such file"},
		{"decode | kernel src=" + filepath.Dir(file) + " fn=invert", "not a regular file"},
		{"decode | kernel src=" + file + " fn=in-vert", "fn="},
		// A special file is refused without being waited on or read on without end.
		{"decode | kernel src=" + fifo(t) + " fn=invert", "not a regular file"},
		{"decode | kernel src=/dev/zero fn=invert", "not a regular file"},
	}
	for _, tt := range tests {
		_, err := compileSpec(tt.spec)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: got %v, want an error with %q", tt.spec, err, tt.want)
		}
	}
}

// fifo is a FIFO that no one writes to.
func fifo(t *testing.T) string {
	p := filepath.Join(t.TempDir(), "k.cu")
	if err := syscall.Mkfifo(p, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func requireNVRTC(t *testing.T) {
	t.Helper()
	if _, err := nvrtc.Probe(); err != nil {
		t.Skipf("no NVRTC: %v", err)
	}
}

func TestKernelStageCompile(t *testing.T) {
	withKernelEnv(t, nil)
	requireNVRTC(t)
	file := kernelFile(t, "invert.cu", invertCU)
	plan, err := compileSpec("decode | kernel src=" + file + " fn=invert out=gray args=1.5 | histogram | save")
	if err != nil {
		t.Fatal(err)
	}
	ops, err := plan.DeviceOps()
	if err != nil || len(ops) != 2 {
		t.Fatalf("device ops: %v, %v", ops, err)
	}
	k, ok := ops[0].Args.(*userkernel.Kernel)
	if !ok || k.Fn != "invert" || k.File != "invert.cu" || k.Out != userkernel.OutGray || len(k.Params) != 1 || !k.Params[0].Float || ops[0].CPU != nil {
		t.Errorf("op %+v, kernel %+v", ops[0], k)
	}
	if out := ops[0].OutShape(stages.Shape{W: 4, H: 3, C: 3}); out.C != 1 || out.W != 4 {
		t.Errorf("out=gray gives %+v", out)
	}
	// The CPU refuses the chain, naming the stage and why.
	err = plan.CheckCPU()
	var pe *pipeline.PosError
	if !errors.As(err, &pe) || !strings.Contains(err.Error(), "col 10: stage kernel runs only on a GPU (a user kernel has no CPU reference): run it with --device cuda") {
		t.Errorf("CheckCPU: %v", err)
	}
	if _, err := pipeline.Run(context.Background(), plan, pipeline.Inputs(), pipeline.Collect(), pipeline.Options{}); err == nil || !strings.Contains(err.Error(), "runs only on a GPU") {
		t.Errorf("a run without a GPU: %v", err)
	}
	// Compile errors are spec errors with the kernel's file:line.
	bad := kernelFile(t, "bad.cu", strings.Replace(invertCU, "255 -", "255 - q", 1))
	_, err = compileSpec("decode | kernel src=" + bad + " fn=invert")
	if err == nil || !strings.Contains(err.Error(), "col 10: kernel: bad.cu:7") {
		t.Errorf("compile error: %v", err)
	}
	// A function the file does not define.
	if _, err = compileSpec("decode | kernel src=" + file + " fn=revert"); err == nil || !strings.Contains(err.Error(), "defines no kernel revert") {
		t.Errorf("missing function: %v", err)
	}
}

// Without a GPU a chain with a kernel stage fails validation, saying why.
func TestKernelStageNeedsGPU(t *testing.T) {
	withKernelEnv(t, errors.New("CUDA driver library libcuda.so.1 not found"))
	requireNVRTC(t)
	_, err := compileSpec("decode | kernel src=" + kernelFile(t, "invert.cu", invertCU) + " fn=invert")
	if err == nil || !strings.Contains(err.Error(), "a user kernel runs only on a GPU, and none is usable: CUDA driver library libcuda.so.1 not found") {
		t.Errorf("got %v", err)
	}
}

// The kernel stage takes arrays: on the CPU the plan refuses to run, naming it; bound, its
// op is an array op with the array calling convention.
func TestArrayKernelStage(t *testing.T) {
	withKernelEnv(t, nil)
	requireNVRTC(t)
	src := kernelFile(t, "axpb.cu", `extern "C" __global__ void axpb(const float *in, float *out, long long n,
    int ndim, const long long *shape, float a, float b) {
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < n) out[i] = __fadd_rn(__fmul_rn(a, in[i]), b);
}`)
	plan, err := compileSpec("load | kernel src=" + src + " fn=axpb args=2f,1f | sum")
	if err != nil {
		t.Fatal(err)
	}
	if err := plan.CheckCPU(); err == nil || !strings.Contains(err.Error(), "runs only on a GPU") {
		t.Errorf("CheckCPU = %v, want the kernel stage refused", err)
	}
	ops, err := plan.DeviceOps()
	if err != nil || len(ops) != 2 || !ops[0].Array || ops[0].Name != Name || ops[0].CPU != nil || ops[1].Reduce == nil {
		t.Fatalf("DeviceOps = %+v, %v", ops, err)
	}
	k, ok := ops[0].Args.(*userkernel.Kernel)
	if !ok || !k.Array || k.Fn != "axpb" || len(k.Params) != 2 {
		t.Errorf("kernel %+v", k)
	}
	if _, err := compileSpec("load | kernel src=" + src + " fn=axpb out=gray"); err == nil || !strings.Contains(err.Error(), "out=gray") {
		t.Errorf("an array kernel with out=gray: %v", err)
	}
	if _, err := compileSpec("load | histogram"); err == nil || !strings.Contains(err.Error(), "takes images") {
		t.Errorf("a pixel stage in an array chain: %v", err)
	}
}
