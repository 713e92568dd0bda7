package cudastage

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/imgpipe/imgpipe/cudastage/cu"
	"github.com/imgpipe/imgpipe/cudastage/sched"
	"github.com/imgpipe/imgpipe/cudastage/userkernel"
	"github.com/imgpipe/imgpipe/stages"
)

// GPU tests of the kernel stage: user kernels compiled by NVRTC for the
// device, launched with userkernel's calling convention, against CPU
// equivalents written here, byte for byte.

const userInvert = `extern "C" __global__ void invert(const unsigned char *in, unsigned char *out,
    int width, int height, int channels, int in_pitch, int out_pitch,
    int in_width, int in_height, int in_channels) {
    int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= width || y >= height) return;
    for (int c = 0; c < channels; c++)
        out[y * out_pitch + x * channels + c] = 255 - in[y * in_pitch + x * in_channels + c];
}
`

// userConv is a 3×3 convolution with the weights 1 2 1 / 2 4 2 / 1 2 1,
// replicated borders, out = (sum·scale + 8·scale) / (16·scale): scale is an
// int argument that must cancel out, and bias a float one added before the
// rounding, so both argument types reach the kernel.
const userConv = `extern "C" __global__ void conv3(const unsigned char *in, unsigned char *out,
    int width, int height, int channels, int in_pitch, int out_pitch,
    int in_width, int in_height, int in_channels, int scale, float bias) {
    int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= width || y >= height) return;
    const int w[3] = {1, 2, 1};
    for (int c = 0; c < channels; c++) {
        int sum = 0;
        for (int dy = -1; dy <= 1; dy++) {
            int yy = min(max(y + dy, 0), height - 1);
            for (int dx = -1; dx <= 1; dx++) {
                int xx = min(max(x + dx, 0), width - 1);
                sum += w[dy + 1] * w[dx + 1] * in[yy * in_pitch + xx * channels + c];
            }
        }
        out[y * out_pitch + x * channels + c] = (unsigned char)((sum * scale + 8 * scale + (int)bias) / (16 * scale));
    }
}
`

func cpuInvert(dst, src *stages.Image, _ *[256]uint64) {
	for y := range src.H {
		for i, v := range src.Row(y) {
			dst.Row(y)[i] = 255 - v
		}
	}
}

func cpuConv(dst, src *stages.Image, _ *[256]uint64) {
	w := [3]int{1, 2, 1}
	for y := range src.H {
		for x := range src.W {
			for c := range src.C {
				sum := 0
				for dy := -1; dy <= 1; dy++ {
					yy := min(max(y+dy, 0), src.H-1)
					for dx := -1; dx <= 1; dx++ {
						xx := min(max(x+dx, 0), src.W-1)
						sum += w[dy+1] * w[dx+1] * int(src.Row(yy)[xx*src.C+c])
					}
				}
				dst.Row(y)[x*src.C+c] = byte((sum*3 + 8*3) / (16 * 3))
			}
		}
	}
}

// userOp is the kernel stage's op (out=same) as package pipeline binds it, with a
// CPU equivalent for the comparison.
func userOp(file, src, fn string, args []userkernel.Scalar, cpu sched.CPUFunc) sched.Op {
	return userOpOut(file, src, fn, userkernel.OutSame, args, cpu)
}

// userOpOut is userOp with another output shape rule.
func userOpOut(file, src, fn string, out userkernel.Out, args []userkernel.Scalar, cpu sched.CPUFunc) sched.Op {
	k := &userkernel.Kernel{File: file, Source: src, Fn: fn, Out: out, Params: args}
	return sched.Op{Name: "kernel", Spec: "kernel src=" + file + " fn=" + fn, Args: k, CPU: cpu,
		Out: func(in stages.Shape) stages.Shape { return k.Out.Shape(in) }}
}

// prepareUser compiles and loads op's kernel into k, as Device.CheckOp does.
func prepareUser(t *testing.T, g *GPU, k *Kernels, op sched.Op) {
	t.Helper()
	if err := g.Do(func() error { return prepareUserKernel(k, g.Device(), op.Args) }); err != nil {
		t.Fatal(err)
	}
}

// The test kernels and the repository's sample kernel (samples/kernels/gray.cu, which
// must give the grayscale stage's bits) equal their CPU equivalents.
func TestGPUUserKernelsMatchCPU(t *testing.T) {
	g := requireGPU(t)
	k := loadTestKernels(t, g)
	sample, err := os.ReadFile(filepath.Join("..", "samples", "kernels", "gray.cu"))
	if err != nil {
		t.Fatal(err)
	}
	ops := []sched.Op{
		userOp("invert.cu", userInvert, "invert", nil, cpuInvert),
		userOp("conv3.cu", userConv, "conv3", []userkernel.Scalar{{I: 3}, {Float: true, F: 0}}, cpuConv),
		userOpOut("gray.cu", string(sample), "gray", userkernel.OutGray, nil,
			func(dst, src *stages.Image, _ *[256]uint64) { stages.Grayscale(dst, src) }),
	}
	var shapes []BatchImage
	for _, s := range dropLarge(sizesAsImages(testSizes())) {
		shapes = append(shapes, s, BatchImage{W: s.W, H: s.H, C: 1})
	}
	for _, op := range ops {
		prepareUser(t, g, k, op)
		for _, l := range []layout{packed, ragged} {
			t.Run(op.Spec, func(t *testing.T) {
				if err := g.Do(func() error { checkOnGPU(t, g, k, op, shapes, l, 14); return nil }); err != nil {
					t.Fatal(err)
				}
			})
		}
	}
}

// sizesAsImages turns (W, H) pairs into RGB shapes.
func sizesAsImages(sizes [][2]int) []BatchImage {
	out := make([]BatchImage, len(sizes))
	for i, s := range sizes {
		out[i] = BatchImage{W: s[0], H: s[1], C: 3}
	}
	return out
}

// A compile error on the device names the kernel's file and line.
func TestGPUUserKernelCompileError(t *testing.T) {
	g := requireGPU(t)
	k := loadTestKernels(t, g)
	bad := strings.Replace(userInvert, "255 -", "255 - q", 1)
	op := userOp("bad.cu", bad, "invert", nil, cpuInvert)
	err := g.Do(func() error { return prepareUserKernel(k, g.Device(), op.Args) })
	if err == nil || !strings.Contains(err.Error(), "bad.cu:7") || !strings.Contains(err.Error(), `"q"`) {
		t.Errorf("got %v, want bad.cu:7 and the log", err)
	}
}

// envFaultChild marks the child process of TestGPUUserKernelFault.
const envFaultChild = "IMGPIPE_TEST_USERKERNEL_FAULT"

// A kernel that writes through a wild pointer is a sticky device error that
// marks the GPU unusable. The fault poisons the context for good, so it runs
// in a child process.
func TestGPUUserKernelFault(t *testing.T) {
	if os.Getenv(envFaultChild) != "1" {
		requireGPU(t)
		cmd := exec.Command(os.Args[0], "-test.run=^TestGPUUserKernelFault$", "-test.v")
		cmd.Env = append(os.Environ(), envFaultChild+"=1")
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "--- PASS: TestGPUUserKernelFault") {
			t.Fatalf("child: %v\n%s", err, out)
		}
		return
	}
	// No cleanups that use the GPU (devMem, loadTestKernels): after the fault
	// they could only fail, and this child process ends with the test.
	g := requireGPU(t)
	var k *Kernels
	if err := g.Do(func() error { k = testKernels(t); return nil }); err != nil {
		t.Fatal(err)
	}
	const wild = `extern "C" __global__ void wild(const unsigned char *in, unsigned char *out,
    int width, int height, int channels, int in_pitch, int out_pitch,
    int in_width, int in_height, int in_channels) {
    ((unsigned char *)0x10)[threadIdx.x] = 1;
}
`
	op := userOp("wild.cu", wild, "wild", nil, cpuInvert)
	prepareUser(t, g, k, op)
	err := g.Do(func() error {
		src, err := cu.MemAlloc(64)
		if err != nil {
			return err
		}
		dst, err := cu.MemAlloc(64)
		if err != nil {
			return err
		}
		s, err := cu.StreamCreate(true)
		if err != nil {
			return err
		}
		b := &Batch{Op: op, Src: []BatchImage{{W: 8, H: 8, C: 1, Stride: 8}}, Dst: []BatchImage{{W: 8, H: 8, C: 1, Stride: 8}}}
		if err := k.Run(s, b, Buffers{Src: src, Dst: dst, Table: src}); err != nil {
			return err
		}
		return s.Synchronize()
	})
	if !cu.IsSticky(err) || !cu.IsSticky(g.Err()) {
		t.Errorf("got %v (GPU: %v), want a sticky device error", err, g.Err())
	}
}
