package pipeline_test

import (
	"context"
	"math/rand"
	"strings"
	"testing"

	"github.com/imgpipe/imgpipe/cudastage/sched/schedtest"
	"github.com/imgpipe/imgpipe/pipeline"
	"github.com/imgpipe/imgpipe/pipeline/gpu"
	"github.com/imgpipe/imgpipe/stages"
	"github.com/imgpipe/imgpipe/stages/stagestest"
)

// invertDef is docs/development.md's "adding a pixel stage" recipe, done in a test: a definition
// (the second of the recipe's four files, pipeline/stage_invert.go, which registers itself;
// here it joins a fresh registry, so that Builtin stays the builtin stages) over a CPU
// reference (the first, here inline).
// The kernel source and the GPU launcher (the other two) are what a real GPU runs; the fake
// device runs the op's CPU function, so the whole device path is exercised without them.
var invertDef = &pipeline.StageDef{
	Name: "invert",
	Kind: pipeline.PixelKind,
	Help: "255 - v for every sample",
	Params: []pipeline.ParamSpec{
		{Name: "keep_gray", Kind: pipeline.Bool, Default: false, Help: "give gray images back untouched"},
	},
	Shape: func(in stages.Shape, p pipeline.Params) (stages.Shape, bool) {
		return in, in.C == 1 && p.Bool("keep_gray")
	},
	CPU: func(p pipeline.Params) (pipeline.CPUFunc, error) {
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
	GPU: pipeline.NoLaunchArgs,
}

// TestAddStageRecipe registers invert next to the builtin stages and runs it through the
// spec parser, the planner and both backends: the CPU and the fake device give the same
// bytes, and they are the inverted pixels.
func TestAddStageRecipe(t *testing.T) {
	reg, err := pipeline.NewRegistry(append(pipeline.Builtin.Stages(), invertDef)...)
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
	var in []pipeline.Input
	for i, s := range [][2]int{{1, 1}, {17, 9}, {64, 3}} {
		in = append(in, pipeline.Input{Name: string(rune('a' + i)), Image: stagestest.ReadImage(rng, s[0], s[1], 3)})
	}
	run := func(be pipeline.Backend) *pipeline.Collector {
		sink := pipeline.Collect()
		if _, err := pipeline.Run(context.Background(), plan, pipeline.Inputs(in...), sink, pipeline.Options{Workers: 2, Backend: be}); err != nil {
			t.Fatal(err)
		}
		return sink
	}
	cpu := run(nil)
	fake := schedtest.NewFake(schedtest.FakeConfig{})
	defer fake.Close()
	dev := run(&gpu.Options{Device: fake, Streams: 2, Batch: 2})
	for i, src := range in {
		c, d := cpu.Results[i], dev.Results[i]
		if c.Status != pipeline.StatusOK || d.Status != pipeline.StatusOK {
			t.Fatalf("%s: cpu %v %v, device %v %v", src.Name, c.Status, c.Err, d.Status, d.Err)
		}
		// invert | grayscale | invert keep_gray (a pass-through on gray) = gray of the inverse.
		want := stages.NewImage(src.Image.W, src.Image.H, 3)
		for k, v := range src.Image.Pix {
			want.Pix[k] = 255 - v
		}
		gray := stages.NewImage(want.W, want.H, 1)
		stages.Grayscale(gray, want)
		if stagestest.Diff(c.Image, gray) != "" || stagestest.Diff(d.Image, gray) != "" {
			t.Errorf("%s: CPU or device output is not the inverted image's gray", src.Name)
		}
		if *c.Histogram != *d.Histogram {
			t.Errorf("%s: histograms differ between CPU and device", src.Name)
		}
	}
}

// Registry.Parse knows the registry's own stages; the package-level Parse only the builtin
// ones. A pipeline parsed from a custom registry plans and runs with them.
func TestRegistryParse(t *testing.T) {
	reg, err := pipeline.NewRegistry(append(pipeline.Builtin.Stages(), invertDef)...)
	if err != nil {
		t.Fatal(err)
	}
	p, err := reg.Parse("decode | invert | histogram")
	if err != nil {
		t.Fatal(err)
	}
	if got := p.String(); got != "decode | invert | histogram" {
		t.Errorf("String() = %q", got)
	}
	// The builder goes on in the same registry.
	p.Then("invert", pipeline.Args{"keep_gray": true}).Grayscale()
	src := stagestest.ReadImage(rand.New(rand.NewSource(3)), 5, 4, 3)
	sink := pipeline.Collect()
	if _, err := p.Run(context.Background(), pipeline.Inputs(pipeline.Input{Name: "x", Image: src}), sink); err != nil {
		t.Fatal(err)
	}
	// invert, then invert keep_gray on RGB (an inversion again), then grayscale: the gray of src.
	want := stages.NewImage(src.W, src.H, 1)
	stages.Grayscale(want, src)
	if r := sink.Results[0]; r.Status != pipeline.StatusOK || stagestest.Diff(r.Image, want) != "" {
		t.Errorf("result %v %v, or not the gray of the input", r.Status, r.Err)
	}

	for _, parse := range []func(string) (*pipeline.Pipeline, error){pipeline.Parse, pipeline.Builtin.Parse} {
		_, err := parse("decode | invert")
		if err == nil || !strings.Contains(err.Error(), `unknown stage "invert"`) {
			t.Errorf("builtin parse of a custom stage: %v", err)
		}
	}
	_, err = reg.Parse("decode | invert keep_grey=true | blurr")
	if errs := pipeline.Errors(err); len(errs) != 2 {
		t.Errorf("want both errors, got %v", err)
	}
}
