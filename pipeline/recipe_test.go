package pipeline

import (
	"context"
	"math/rand"
	"testing"

	"github.com/imgpipe/imgpipe/cudastage/sched/schedtest"
	"github.com/imgpipe/imgpipe/stages"
)

// invertDef is the README's "adding a pixel stage" recipe, done in a test: a definition
// (the second of the recipe's four files, pipeline/stage_invert.go, which registers itself;
// here it joins a fresh registry, so that Builtin stays the builtin stages) over a CPU
// reference (the first, here inline).
// The kernel source and the GPU launcher (the other two) are what a real GPU runs; the fake
// device runs the op's CPU function, so the whole device path is exercised without them.
var invertDef = &StageDef{
	Name: "invert",
	Kind: PixelKind,
	Help: "255 - v for every sample",
	Params: []ParamSpec{
		{Name: "keep_gray", Kind: Bool, Default: false, Help: "give gray images back untouched"},
	},
	Shape: func(in stages.Shape, p Params) (stages.Shape, bool) {
		return in, in.C == 1 && p.Bool("keep_gray")
	},
	CPU: func(p Params) (CPUFunc, error) {
		return func(dst, src *stages.Image, _ *[256]uint64) {
			if dst == nil {
				return // keep_gray on a gray image: passed through
			}
			for y := range src.H {
				s, d := src.Row(y), dst.Row(y)
				for i, v := range s {
					d[i] = 255 - v
				}
			}
		}, nil
	},
	GPU: NoLaunchArgs,
}

// TestAddStageRecipe registers invert next to the builtin stages and runs it through the
// spec parser, the planner and both backends: the CPU and the fake device give the same
// bytes, and they are the inverted pixels.
func TestAddStageRecipe(t *testing.T) {
	reg, err := NewRegistry(append(Builtin.Stages(), invertDef)...)
	if err != nil {
		t.Fatal(err)
	}
	steps, err := reg.ParseSpec("decode | invert | grayscale | invert keep_gray=true | histogram")
	if err != nil {
		t.Fatal(err)
	}
	plan, err := reg.Compile(steps)
	if err != nil {
		t.Fatal(err)
	}
	if op := plan.Pixels[0].GPU; op == nil || op.Name != "invert" || op.Spec != "invert keep_gray=false" {
		t.Fatalf("invert's device op = %+v", op)
	}
	rng := rand.New(rand.NewSource(8))
	var in []Input
	for i, s := range [][2]int{{1, 1}, {17, 9}, {64, 3}} {
		in = append(in, Input{Name: string(rune('a' + i)), Image: randImage(rng, s[0], s[1], 3)})
	}
	run := func(gpu *GPUOptions) *Collector {
		sink := Collect()
		if _, err := Run(context.Background(), plan, Inputs(in...), sink, Options{Workers: 2, GPU: gpu}); err != nil {
			t.Fatal(err)
		}
		return sink
	}
	cpu := run(nil)
	dev := run(&GPUOptions{Device: fakeGPU(t, schedtest.FakeConfig{}), Streams: 2, Batch: 2})
	for i, src := range in {
		c, d := cpu.Results[i], dev.Results[i]
		if c.Status != StatusOK || d.Status != StatusOK {
			t.Fatalf("%s: cpu %v %v, device %v %v", src.Name, c.Status, c.Err, d.Status, d.Err)
		}
		// invert | grayscale | invert keep_gray (a pass-through on gray) = gray of the inverse.
		want := stages.NewImage(src.Image.W, src.Image.H, 3)
		for k, v := range src.Image.Pix {
			want.Pix[k] = 255 - v
		}
		gray := stages.NewImage(want.W, want.H, 1)
		stages.Grayscale(gray, want)
		if !same(c.Image, gray) || !same(d.Image, gray) {
			t.Errorf("%s: CPU or device output is not the inverted image's gray", src.Name)
		}
		if *c.Histogram != *d.Histogram {
			t.Errorf("%s: histograms differ between CPU and device", src.Name)
		}
	}
}
