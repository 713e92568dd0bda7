package cudastage

import (
	"fmt"
	"math"

	"github.com/imgpipe/imgpipe/cudastage/cu"
	"github.com/imgpipe/imgpipe/cudastage/nvrtc"
	"github.com/imgpipe/imgpipe/cudastage/sched"
	"github.com/imgpipe/imgpipe/cudastage/userkernel"
)

// The kernel stage on the GPU: a user's CUDA kernel (package userkernel),
// compiled by NVRTC for the device's architecture when an executor checks
// its ops, and launched once per image with userkernel's calling convention.
func init() {
	register("kernel", &launcher{check: userKernelOf(false), prepare: prepareUserKernel, run: runUserKernel})
	registerArray("kernel", &arrayLauncher{check: userKernelOf(true), prepare: prepareUserKernel, run: runUserArrayKernel,
		record: kDimsRecord, encode: encodeDims})
}

// userFunc is a loaded user kernel.
type userFunc struct {
	mod cu.Module
	fn  cu.Function
}

// userKernelOf checks that an op's Args is a user kernel with the image
// calling convention, or (array set) the array one.
func userKernelOf(array bool) func(args sched.LaunchArgs) error {
	return checked(func(k *userkernel.Kernel) error {
		switch {
		case k == nil:
			return fmt.Errorf("want a *userkernel.Kernel, got %T", k)
		case k.Array != array:
			return fmt.Errorf("kernel %s: array calling convention %v, want %v", k.Fn, k.Array, array)
		}
		return nil
	})
}

// prepareUserKernel compiles the kernel for dev (through NVRTC's cache) and
// loads it into the current context, once per Kernels.
func prepareUserKernel(k *Kernels, dev cu.Device, args sched.LaunchArgs) error {
	uk := args.(*userkernel.Kernel)
	k.mu.Lock()
	defer k.mu.Unlock()
	if _, ok := k.user[uk]; ok {
		return nil
	}
	major, minor, err := dev.ComputeCapability()
	if err != nil {
		return err
	}
	dir, err := nvrtc.DefaultCacheDir()
	if err != nil {
		dir = "" // compile every time rather than fail
	}
	code, err := nvrtc.Compile(uk.Request(10*major+minor), dir)
	if err != nil {
		return fmt.Errorf("kernel %s: %w", uk.File, err)
	}
	mod, err := cu.ModuleLoadData(code)
	if err != nil {
		return fmt.Errorf("kernel %s: %w", uk.File, err)
	}
	fn, err := mod.Function(uk.Fn)
	if err != nil {
		mod.Unload()
		return fmt.Errorf("kernel %s: function %s: %w", uk.File, uk.Fn, err)
	}
	k.user[uk] = userFunc{mod: mod, fn: fn}
	return nil
}

// prepared returns the loaded function of the op's user kernel.
func (k *Kernels) prepared(op sched.Op) (*userkernel.Kernel, cu.Function, error) {
	uk := op.Args.(*userkernel.Kernel)
	k.mu.Lock()
	u, ok := k.user[uk]
	k.mu.Unlock()
	if !ok {
		return nil, 0, fmt.Errorf("%s: kernel not prepared (the device's CheckOp loads it)", op)
	}
	return uk, u.fn, nil
}

// runUserArrayKernel launches the kernel over array i of the batch, on s,
// with the array calling convention: its axes are its record in the launch
// table.
func runUserArrayKernel(k *Kernels, s cu.Stream, b *Batch, i int, buf Buffers) error {
	uk, fn, err := k.prepared(b.Op)
	if err != nil {
		return err
	}
	src := b.Src[i]
	a := userkernel.Array{
		In: uint64(buf.Src) + src.Off, Out: uint64(buf.Dst) + b.Dst[i].Off,
		N: int64(src.W), NDim: len(b.Dims[i]), Shape: uint64(buf.Table) + uint64(i*kDimsRecord),
	}
	return cu.LaunchKernel(fn, userkernel.ArrayGrid(a.N), [3]uint32{userkernel.ArrayBlock, 1, 1}, 0, s, uk.ArrayArgs(a)...)
}

// runUserKernel launches the kernel once per image of the batch, on s.
func runUserKernel(k *Kernels, s cu.Stream, b *Batch, buf Buffers) error {
	uk, fn, err := k.prepared(b.Op)
	if err != nil {
		return err
	}
	if buf.Src == 0 || buf.Dst == 0 {
		return fmt.Errorf("%s: source and destination pointers must be set", b.Op)
	}
	for i, src := range b.Src {
		dst := b.Dst[i]
		if src.Stride > math.MaxInt32 || dst.Stride > math.MaxInt32 {
			return fmt.Errorf("%s: image %d: pitch over 32 bits", b.Op, i)
		}
		in := userkernel.Image{Shape: src.shape(), Ptr: uint64(buf.Src) + src.Off, Pitch: src.Stride}
		out := userkernel.Image{Shape: dst.shape(), Ptr: uint64(buf.Dst) + dst.Off, Pitch: dst.Stride}
		grid := userkernel.Grid(out.Shape)
		if err := cu.LaunchKernel(fn, grid, [3]uint32{userkernel.Block, userkernel.Block, 1}, 0, s, uk.Args(in, out)...); err != nil {
			return fmt.Errorf("%s: image %d: %w", b.Op, i, err)
		}
	}
	return nil
}
