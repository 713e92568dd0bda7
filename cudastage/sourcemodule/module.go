package sourcemodule

import (
	"errors"
	"fmt"
	"strings"
	"unsafe"

	"github.com/imgpipe/imgpipe/cudastage/cu"
	"github.com/imgpipe/imgpipe/cudastage/nvrtc"
	"github.com/imgpipe/imgpipe/cudastage/userkernel"
)

// Module is CUDA source compiled for the Context's GPU and loaded into it.
// It stays loaded until the Context is closed.
type Module struct {
	c      *Context
	name   string
	source string
	mod    cu.Module
}

// Compile compiles source (named name in errors: "double.cu") with NVRTC
// for the GPU's architecture, through the Context's cache, and loads it. A
// program NVRTC refuses is an *nvrtc.CompileError with the first error's
// line and column and NVRTC's log.
func (c *Context) Compile(name, source string) (*Module, error) {
	code, err := nvrtc.Compile(nvrtc.Request{Name: name, Source: source, Arch: c.arch}, c.cacheDir)
	if err != nil {
		return nil, err
	}
	m := &Module{c: c, name: name, source: source}
	if err := c.do(func() (err error) {
		m.mod, err = cu.ModuleLoadData(code)
		return err
	}); err != nil {
		return nil, fmt.Errorf("sourcemodule: loading %s: %w", name, err)
	}
	c.mu.Lock()
	c.modules = append(c.modules, m)
	c.mu.Unlock()
	return m, nil
}

// Function is a kernel of a Module.
type Function struct {
	m        *Module
	name     string
	fn       cu.Function
	maxBlock int // the most threads a block may have, given the kernel's registers
}

// Function returns the extern "C" __global__ function called name.
func (m *Module) Function(name string) (*Function, error) {
	f := &Function{m: m, name: name}
	if err := m.c.do(func() (err error) {
		if f.fn, err = m.mod.Function(name); err != nil {
			return err
		}
		f.maxBlock, err = f.fn.Attribute(cu.FuncMaxThreadsPerBlock)
		return err
	}); err != nil {
		return nil, fmt.Errorf("sourcemodule: %s: %w", m.name, err)
	}
	return f, nil
}

// Arg is one kernel argument: a device buffer's address or a C int or
// float.
type Arg struct {
	isPtr  bool // buf's address, even when buf is nil (an error at Launch)
	buf    *DeviceBuffer
	scalar userkernel.Scalar
}

// Ptr passes a device buffer's address (a T* parameter).
func Ptr(d *DeviceBuffer) Arg { return Arg{isPtr: true, buf: d} }

// Int passes a C int.
func Int(v int32) Arg { return Arg{scalar: userkernel.Scalar{I: v}} }

// Float passes a C float.
func Float(v float32) Arg { return Arg{scalar: userkernel.Scalar{Float: true, F: v}} }

// Scalar passes a parsed user parameter (userkernel.ParseArgs) as its type.
func Scalar(s userkernel.Scalar) Arg { return Arg{scalar: s} }

// values packs args for cuLaunchKernel, checking every buffer first.
func (c *Context) values(args []Arg) ([]any, error) {
	vals := make([]any, len(args))
	for i, a := range args {
		if !a.isPtr {
			vals[i] = a.scalar.Arg()
			continue
		}
		p, err := a.buf.ptr(c)
		if err != nil {
			return nil, fmt.Errorf("argument %d: %w", i+1, err)
		}
		vals[i] = &p
	}
	return vals, nil
}

// Launch queues the kernel on the Context's stream over grid blocks of
// block threads, with args in the kernel's parameter order. Every dimension
// must be at least 1, and a block must not have more threads than the
// kernel allows. Errors in the kernel itself show at Synchronize.
func (f *Function) Launch(grid, block [3]uint32, args ...Arg) error {
	threads := uint64(1)
	for i := range 3 {
		if grid[i] == 0 || block[i] == 0 {
			return fmt.Errorf("sourcemodule: %s: grid %v, block %v: every dimension must be at least 1", f.name, grid, block)
		}
		threads *= uint64(block[i])
	}
	if threads > uint64(f.maxBlock) {
		return fmt.Errorf("sourcemodule: %s: block %v has %d threads; this kernel allows at most %d", f.name, block, threads, f.maxBlock)
	}
	c := f.m.c
	vals, err := c.values(args)
	if err != nil {
		return fmt.Errorf("sourcemodule: %s: %w", f.name, err)
	}
	return c.do(func() error { return cu.LaunchKernel(f.fn, grid, block, 0, c.kernelStream(), vals...) })
}

// StageArgs returns the arguments of the pipeline stage "kernel" (package
// pipeline/kernelstage registers it) that launches this module's function fn
// on every image, with userkernel's calling convention, output rule out and
// the user's parameters params, as the map pipeline.Args is:
//
//	p := pipeline.New().Decode().Then("kernel", m.StageArgs("invert", userkernel.OutSame)).Save("png")
//
// The stage compiles the same source again when the pipeline is planned
// (NVRTC's cache makes that a file read) and names it "source" in errors.
func (m *Module) StageArgs(fn string, out userkernel.Out, params ...userkernel.Scalar) map[string]any {
	return StageArgs(m.source, fn, out, params...)
}

// StageArgs is Module.StageArgs without a GPU: the "kernel" stage's
// arguments for source, fn, out and params. Planning the pipeline checks
// them (a compile and the function's presence) and needs a GPU to run.
func StageArgs(source, fn string, out userkernel.Out, params ...userkernel.Scalar) map[string]any {
	texts := make([]string, len(params))
	for i, p := range params {
		texts[i] = p.String()
	}
	return map[string]any{"source": source, "fn": fn, "out": string(out), "args": strings.Join(texts, ",")}
}

// float32s views b as float32s. Host buffers come from cu.MemHostAlloc,
// which maps page-aligned memory, so a misaligned one is a bug here.
func float32s(b []byte) []float32 {
	if len(b) < 4 {
		return nil
	}
	if uintptr(unsafe.Pointer(&b[0]))%4 != 0 {
		panic(errors.New("sourcemodule: host buffer not 4-byte aligned"))
	}
	return unsafe.Slice((*float32)(unsafe.Pointer(&b[0])), len(b)/4)
}
