// Package kernelstage registers the kernel stage, a user's CUDA kernel compiled at run
// time by NVRTC, into pipeline.Builtin. It lives apart from package pipeline so that the
// engine core imports no driver binding: a program that runs user kernels imports it for
// its effect, as image/png registers a format,
//
//	import _ "github.com/imgpipe/imgpipe/pipeline/kernelstage"
//
// (sourcemodule.StageArgs gives the stage's arguments for a kernel compiled in Go). See package
// userkernel for the calling conventions and package cudastage for the launchers. In an
// image chain the stage is a pixel stage; in an array chain (load | ...) it takes the
// arrays, with the array calling convention (pipeline.StageDef.ArrayGPU).
package kernelstage

import (
	"errors"
	"fmt"
	"path/filepath"

	"github.com/imgpipe/imgpipe/cudastage/cu"
	"github.com/imgpipe/imgpipe/cudastage/nvrtc"
	"github.com/imgpipe/imgpipe/cudastage/sched"
	"github.com/imgpipe/imgpipe/cudastage/userkernel"
	"github.com/imgpipe/imgpipe/fsguard"
	"github.com/imgpipe/imgpipe/pipeline"
	"github.com/imgpipe/imgpipe/stages"
)

// Name is the stage's name in specs and jobs.
const Name = "kernel"

func init() {
	if err := pipeline.Builtin.Register(def); err != nil {
		panic("kernelstage: " + err.Error())
	}
}

// gpuUsable says why no GPU can run a kernel stage (nil when one can); tests replace it.
var gpuUsable = cu.Load

var kernelOuts = func() []string {
	out := make([]string, len(userkernel.OutRules))
	for i, o := range userkernel.OutRules {
		out[i] = string(o)
	}
	return out
}()

var def = &pipeline.StageDef{
	Name:    Name,
	Kind:    pipeline.PixelKind,
	Help:    "your own CUDA kernel (compiled at run time by NVRTC), one thread per output pixel",
	GPUOnly: "a user kernel has no CPU reference",
	Doc: `Compiles src (a .cu file) or source (inline text, YAML) with NVRTC for the GPU's
architecture (cached under the user cache folder, imgpipe/kernels) and launches the
extern "C" __global__ function fn once per image, over 16×16 blocks covering the
output, with the arguments
  (const unsigned char *in, unsigned char *out, int width, int height, int channels,
   int in_pitch, int out_pitch, int in_width, int in_height, int in_channels, args...)
where width, height and channels are the output's (out=same|gray|rgb|transpose) and
args are the comma-separated scalars of args= (1.5 or 2f is a float, 3 an int).
In an array chain (load | ...) it is launched once per array, over 1-D blocks of 256
threads covering its n elements, one thread per element, with the arguments
  (const float *in, float *out, long long n, int ndim, const long long *shape, args...)
where out has in's shape (out=same); use __fmul_rn and __fadd_rn where a CPU
reference must give the same bits (a NaN keeps the bits the GPU gives it). Compile
errors are spec errors with file:line:col. The stage runs only on a GPU. Example:
samples/kernels/gray.cu, the grayscale stage's formula (kernel
src=samples/kernels/gray.cu fn=gray out=gray).`,
	Params: []pipeline.ParamSpec{
		{Name: "src", Kind: pipeline.String, Default: "", Help: "the kernel's .cu file (or give source)"},
		{Name: "source", Kind: pipeline.String, Default: "", Help: "the kernel's source text, inline (YAML)"},
		{Name: "fn", Kind: pipeline.String, Default: "", Help: "the extern \"C\" __global__ function to launch"},
		{Name: "out", Kind: pipeline.Enum, Default: string(userkernel.OutSame), Values: kernelOuts,
			Help: "output shape: same, gray (1 channel), rgb (3), transpose (W and H swap)"},
		{Name: "args", Kind: pipeline.String, Default: "", Help: "the kernel's scalar arguments after the convention's: 1.5,3"},
	},
	Shape: func(in stages.Shape, p pipeline.Params) (stages.Shape, bool) {
		return userkernel.Out(p.Str("out")).Shape(in), false
	},
	GPU:      func(p pipeline.Params) (sched.LaunchArgs, error) { return bindKernel(p, false) },
	ArrayGPU: func(p pipeline.Params) (sched.LaunchArgs, error) { return bindKernel(p, true) },
}

// bindKernel reads and checks the stage's kernel (an NVRTC compile included) with the
// image calling convention, or the array one, and that a GPU can run it, so that every
// problem is a spec error before any input is read.
func bindKernel(p pipeline.Params, array bool) (sched.LaunchArgs, error) {
	k := &userkernel.Kernel{Fn: p.Str("fn"), Out: userkernel.Out(p.Str("out")), Array: array}
	switch src, text := p.Str("src"), p.Str("source"); {
	case (src == "") == (text == ""):
		return nil, errors.New("give the kernel as src=FILE or as source (inline), one of them")
	case src != "":
		code, err := readSource(src)
		if err != nil {
			return nil, err
		}
		k.File, k.Source = filepath.Base(src), code
	default:
		k.File, k.Source = "source", text
	}
	var err error
	if k.Params, err = userkernel.ParseArgs(p.Str("args")); err != nil {
		return nil, err
	}
	cache, err := nvrtc.DefaultCacheDir()
	if err != nil {
		cache = "" // compile without a cache rather than fail
	}
	if err := k.Check(cache); err != nil {
		return nil, err
	}
	if err := gpuUsable(); err != nil {
		return nil, fmt.Errorf("a user kernel runs only on a GPU, and none is usable: %w", err)
	}
	return k, nil
}

// readSource reads a kernel file: a regular file (a FIFO or a device is refused without
// waiting on it) of at most nvrtc.MaxSourceBytes, checked before it is read.
func readSource(path string) (string, error) {
	b, err := fsguard.ReadFile(path, fsguard.FollowLinks, nvrtc.MaxSourceBytes)
	if errors.Is(err, fsguard.ErrNotRegular) || errors.Is(err, fsguard.ErrTooLarge) {
		return "", fmt.Errorf("%s: not a regular file of at most %d bytes", path, nvrtc.MaxSourceBytes)
	}
	return string(b), err
}
