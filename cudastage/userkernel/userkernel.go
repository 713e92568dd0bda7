// Package userkernel describes a user's CUDA kernel as an imgpipe stage: its
// calling convention, its typed scalar parameters, its output shape rule and
// the checks made before anything runs. It knows nothing of devices; the
// cudastage launcher for the stage "kernel" loads and launches it.
//
// # Calling convention
//
// The function must be declared extern "C" __global__ and take, in order:
//
//	const unsigned char *in,  // the input image, row 0 first
//	unsigned char *out,       // the output image, row 0 first
//	int width, int height,    // the OUTPUT image's size
//	int channels,             // the OUTPUT image's channels (1 or 3)
//	int in_pitch,             // bytes between input rows
//	int out_pitch,            // bytes between output rows
//	int in_width, int in_height, int in_channels,
//	... the user's parameters, in order (int or float)
//
// It is launched once per image over a 2-D grid of 16×16 blocks that covers
// the output image, one thread per output pixel: x = blockIdx.x·16 +
// threadIdx.x, y likewise; threads with x ≥ width or y ≥ height must do
// nothing. The kernel must write every byte of the output's pixels.
//
// # Array calling convention
//
// In a chain of float32 arrays (load | ...), the function takes, in order:
//
//	const float *in,          // the input array's elements, C order
//	float *out,               // the output array: the input's shape
//	long long n,              // the number of elements (1 for a 0-d array)
//	int ndim,                 // the number of axes (0 for a 0-d array)
//	const long long *shape,   // the ndim axis lengths, in device memory
//	... the user's parameters, in order (int or float)
//
// It is launched once per array over a 1-D grid of ArrayBlock-thread blocks
// that covers the elements, one thread per element: i = blockIdx.x·256 +
// threadIdx.x; threads with i ≥ n must do nothing. The kernel must write
// out[i] for every i < n; in and out never overlap. The output has the
// input's shape (out=same, the only rule for arrays). Write it with the _rn
// intrinsics (__fmul_rn, __fadd_rn) where a CPU reference must give the same
// bits: NVRTC, like nvcc, contracts a*x+b into one fused multiply-add. The
// elements are written as the kernel computes them: a NaN keeps the bits the
// GPU gives it (0x7FFFFFFF for a new one), where imgpipe's own array stages
// write 0x7FC00000.
package userkernel

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/imgpipe/imgpipe/cudastage/nvrtc"
	"github.com/imgpipe/imgpipe/stages"
)

// Block is the side of a launch's square thread block.
const Block = 16

// ArrayBlock is the thread block of an array kernel's 1-D launch.
const ArrayBlock = 256

// MaxParams bounds the user's scalar parameters.
const MaxParams = 32

// Out is a rule that gives the output image's shape from the input's.
type Out string

// The output shape rules.
const (
	OutSame      Out = "same"      // the input's shape
	OutGray      Out = "gray"      // the input's size, 1 channel
	OutRGB       Out = "rgb"       // the input's size, 3 channels
	OutTranspose Out = "transpose" // width and height swapped, channels kept
)

// OutRules lists every rule, in the order help texts show them.
var OutRules = []Out{OutSame, OutGray, OutRGB, OutTranspose}

// Shape applies the rule to an input shape.
func (o Out) Shape(in stages.Shape) stages.Shape {
	switch o {
	case OutGray:
		in.C = 1
	case OutRGB:
		in.C = 3
	case OutTranspose:
		in.W, in.H = in.H, in.W
	}
	return in
}

// Scalar is one user parameter: an int32 (written without '.', 'e' or a
// trailing 'f') or a float32 (written with one of them: 1.5, 2e3, 3f).
type Scalar struct {
	Float bool
	I     int32
	F     float32
}

// String writes s so that ParseArgs reads it back as the same type.
func (s Scalar) String() string {
	if !s.Float {
		return strconv.FormatInt(int64(s.I), 10)
	}
	t := strconv.FormatFloat(float64(s.F), 'g', -1, 32)
	if !strings.ContainsAny(t, ".eEn") { // n: NaN and Inf never get here
		t += "f"
	}
	return t
}

// ParseArgs reads a comma-separated list of scalars ("1.5,3,2f"); the empty
// string is no parameters.
func ParseArgs(s string) ([]Scalar, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	parts := strings.Split(s, ",")
	if len(parts) > MaxParams {
		return nil, fmt.Errorf("%d kernel arguments, at most %d", len(parts), MaxParams)
	}
	out := make([]Scalar, len(parts))
	for i, p := range parts {
		p = strings.TrimSpace(p)
		if strings.HasSuffix(p, "f") || strings.ContainsAny(p, ".eE") {
			f, err := strconv.ParseFloat(strings.TrimSuffix(p, "f"), 32)
			if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
				return nil, fmt.Errorf("kernel argument %d (%q): want a finite float32", i+1, p)
			}
			out[i] = Scalar{Float: true, F: float32(f)}
			continue
		}
		n, err := strconv.ParseInt(p, 10, 32)
		if err != nil {
			return nil, fmt.Errorf("kernel argument %d (%q): want an int32 or a float (1.5, 2f)", i+1, p)
		}
		out[i] = Scalar{I: int32(n)}
	}
	return out, nil
}

// Kernel is a user kernel bound as a stage: the launch arguments of the
// stage "kernel".
type Kernel struct {
	File   string   // the source's name in messages ("invert.cu")
	Source string   // CUDA C++ text
	Fn     string   // the extern "C" function to launch
	Out    Out      // the output shape rule
	Params []Scalar // the user's parameters, after the convention's
	// Array selects the array calling convention (a chain of float32
	// arrays); Out is then OutSame.
	Array bool
}

// fnName is a C identifier.
var fnName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// LaunchStage names the stage whose launchers read a Kernel, "kernel", so that a
// Kernel is that stage's launch arguments (sched.LaunchArgs).
func (*Kernel) LaunchStage() string { return "kernel" }

// Request is the NVRTC compile of k for architecture arch (10·major+minor).
func (k *Kernel) Request(arch int) nvrtc.Request {
	return nvrtc.Request{Name: k.File, Source: k.Source, Arch: arch}
}

// CheckArch is the architecture Check compiles for when no GPU is at hand:
// the oldest that imgpipe's own kernels target, so any NVRTC that can build
// for the GPU machine can build for it.
const CheckArch = 75

// Check validates k before anything runs: the fields, then an NVRTC compile
// for CheckArch (compile errors give file:line:col and the log), then that
// the code defines Fn as a kernel. The compile goes through the cache, so
// the device's own compile of the same source is the only other one.
func (k *Kernel) Check(cacheDir string) error {
	switch {
	case !fnName.MatchString(k.Fn):
		return fmt.Errorf("fn=%q: want the name of an extern \"C\" __global__ function", k.Fn)
	case !slices.Contains(OutRules, k.Out):
		return fmt.Errorf("out=%q: want one of %v", k.Out, OutRules)
	case len(k.Params) > MaxParams:
		return fmt.Errorf("%d kernel arguments, at most %d", len(k.Params), MaxParams)
	case k.Array && k.Out != OutSame:
		return fmt.Errorf("out=%s: an array kernel writes an array of its input's shape (out=%s)", k.Out, OutSame)
	}
	code, err := nvrtc.Compile(k.Request(CheckArch), cacheDir)
	if err != nil {
		return err
	}
	return k.checkFunction(code)
}

// checkFunction reports whether the CUBIN defines Fn as a kernel: a function
// symbol with that exact (unmangled) name.
func (k *Kernel) checkFunction(cubin []byte) error {
	// A CUBIN keeps the CUDA ABI version in the ELF header's e_version
	// (byte 20), which debug/elf refuses unless it is 1: read a copy that
	// says 1.
	if len(cubin) >= 24 {
		cubin = slices.Clone(cubin)
		binary.LittleEndian.PutUint32(cubin[20:], uint32(elf.EV_CURRENT))
	}
	f, err := elf.NewFile(bytes.NewReader(cubin))
	if err != nil {
		return fmt.Errorf("%s: the compiled code is not a CUBIN: %w", k.File, err)
	}
	syms, err := f.Symbols()
	if err != nil {
		return fmt.Errorf("%s: reading the compiled code's symbols: %w", k.File, err)
	}
	var fns []string
	for _, s := range syms {
		if elf.ST_TYPE(s.Info) != elf.STT_FUNC || elf.ST_BIND(s.Info) != elf.STB_GLOBAL {
			continue
		}
		if s.Name == k.Fn {
			return nil
		}
		fns = append(fns, s.Name)
	}
	if len(fns) == 0 {
		return fmt.Errorf("%s defines no kernel %s (no __global__ function at all)", k.File, k.Fn)
	}
	return fmt.Errorf("%s defines no kernel %s (is it extern \"C\" __global__?); it defines %s", k.File, k.Fn, strings.Join(fns, ", "))
}

// Image is one image of a launch: its shape and where its rows are.
type Image struct {
	stages.Shape
	Ptr   uint64 // device address of row 0
	Pitch int    // bytes between rows
}

// Args returns the kernel's parameter values for in → out, in the calling
// convention's order, as pointers for cuLaunchKernel (package cu accepts a
// uint64 for a device pointer).
func (k *Kernel) Args(in, out Image) []any {
	vals := []any{
		&in.Ptr, &out.Ptr,
		ptr(int32(out.W)), ptr(int32(out.H)), ptr(int32(out.C)),
		ptr(int32(in.Pitch)), ptr(int32(out.Pitch)),
		ptr(int32(in.W)), ptr(int32(in.H)), ptr(int32(in.C)),
	}
	for _, p := range k.Params {
		vals = append(vals, p.Arg())
	}
	return vals
}

// Arg returns s as a kernel parameter for cuLaunchKernel: a pointer to a
// copy of its int32 or float32, the C types int and float.
func (s Scalar) Arg() any {
	if s.Float {
		return ptr(s.F)
	}
	return ptr(s.I)
}

func ptr[T any](v T) *T { return &v }

// Grid is the launch's grid for an output image: 16×16 blocks covering it.
func Grid(out stages.Shape) [3]uint32 {
	return [3]uint32{uint32((out.W + Block - 1) / Block), uint32((out.H + Block - 1) / Block), 1}
}

// Array is one array of a launch (the array calling convention).
type Array struct {
	In, Out uint64 // device addresses of the input's and output's elements
	N       int64  // elements
	NDim    int    // axes
	Shape   uint64 // device address of the NDim axis lengths, as int64s
}

// ArrayArgs returns the kernel's parameter values for a, in the array
// calling convention's order, as pointers for cuLaunchKernel.
func (k *Kernel) ArrayArgs(a Array) []any {
	vals := []any{&a.In, &a.Out, ptr(a.N), ptr(int32(a.NDim)), &a.Shape}
	for _, p := range k.Params {
		vals = append(vals, p.Arg())
	}
	return vals
}

// ArrayGrid is the launch's grid for an array of n elements: ArrayBlock
// threads per block, covering them.
func ArrayGrid(n int64) [3]uint32 {
	return [3]uint32{uint32((n + ArrayBlock - 1) / ArrayBlock), 1, 1}
}
