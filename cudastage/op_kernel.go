package cudastage

import (
	"fmt"
	"math"

	"github.com/imgpipe/imgpipe/cudastage/cu"
	"github.com/imgpipe/imgpipe/cudastage/nvrtc"
	"github.com/imgpipe/imgpipe/cudastage/userkernel"
)

// The kernel stage on the GPU: a user's CUDA kernel (package userkernel),
// compiled by NVRTC for the device's architecture when an executor checks
// its ops, and launched once per image with userkernel's calling convention.
func init() {
	register("kernel", &launcher{check: checkUserKernel, prepare: prepareUserKernel, run: runUserKernel})
}

// userFunc is a loaded user kernel.
type userFunc struct {
	mod cu.Module
	fn  cu.Function
}

func checkUserKernel(args any) error {
	if k, ok := args.(*userkernel.Kernel); !ok || k == nil {
		return fmt.Errorf("want a *userkernel.Kernel, got %T", args)
	}
	return nil
}

// prepareUserKernel compiles the kernel for dev (through NVRTC's cache) and
// loads it into the current context, once per Kernels.
func prepareUserKernel(k *Kernels, dev cu.Device, args any) error {
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

// runUserKernel launches the kernel once per image of the batch, on s.
func runUserKernel(k *Kernels, s cu.Stream, b *Batch, buf Buffers) error {
	uk := b.Op.Args.(*userkernel.Kernel)
	k.mu.Lock()
	u, ok := k.user[uk]
	k.mu.Unlock()
	if !ok {
		return fmt.Errorf("%s: kernel not prepared (the device's CheckOp loads it)", b.Op)
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
		if err := cu.LaunchKernel(u.fn, grid, [3]uint32{userkernel.Block, userkernel.Block, 1}, 0, s, uk.Args(in, out)...); err != nil {
			return fmt.Errorf("%s: image %d: %w", b.Op, i, err)
		}
	}
	return nil
}
