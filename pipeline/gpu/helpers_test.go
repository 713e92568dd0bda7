package gpu

import (
	"bytes"
	"math"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/imgpipe/imgpipe/pipeline"
	"github.com/imgpipe/imgpipe/stages"
	"github.com/imgpipe/imgpipe/stages/npy"
)

// The builtin stage definitions the tests build registries from.
var (
	decodeDef    = builtinDef("decode")
	grayscaleDef = builtinDef("grayscale")
	blurDef      = builtinDef("blur")
	boxBlurDef   = builtinDef("boxblur")
	transposeDef = builtinDef("transpose")
	histogramDef = builtinDef("histogram")
	saveDef      = builtinDef("save")
)

func builtinDef(name string) *pipeline.StageDef {
	d, ok := pipeline.Builtin.Lookup(name)
	if !ok {
		panic("no builtin stage " + name)
	}
	return d
}

// sameShape is StageDef.Shape for a stage whose output has its input's shape.
func sameShape(in stages.Shape, _ pipeline.Params) (stages.Shape, bool) { return in, false }

var f32Inf = float32(math.Inf(1))

func npyBytes(t *testing.T, shape []int, data []float32) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := npy.Write(&b, &npy.Array{Shape: shape, Data: data}); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func mustSteps(t *testing.T, spec string) []pipeline.Step {
	t.Helper()
	steps, err := pipeline.ParseSpec(spec)
	if err != nil {
		t.Fatalf("ParseSpec(%q): %v", spec, err)
	}
	return steps
}

func mustArrayPlan(t *testing.T, spec string) *pipeline.Plan {
	t.Helper()
	plan, err := pipeline.Compile(mustSteps(t, spec))
	if err != nil {
		t.Fatal(err)
	}
	return plan
}

func compileWith(t testing.TB, r *pipeline.Registry, spec string) *pipeline.Plan {
	t.Helper()
	steps, err := r.ParseSpec(spec)
	if err != nil {
		t.Fatal(err)
	}
	plan, err := r.Compile(steps)
	if err != nil {
		t.Fatal(err)
	}
	return plan
}

// checkNoLeaks waits for the goroutine count to come back to base, and fails with the
// remaining stacks if it does not.
func checkNoLeaks(t *testing.T, base int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > base {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			n := runtime.Stack(buf, true)
			t.Fatalf("%d goroutines left, want %d:\n%s", runtime.NumGoroutine(), base, buf[:n])
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func reportLines(t *testing.T, report string) []string {
	t.Helper()
	lines := strings.Split(strings.TrimSuffix(report, "\n"), "\n")
	if len(lines) == 0 || !strings.HasPrefix(lines[len(lines)-1], `{"summary":`) {
		t.Fatalf("report does not end with a summary line:\n%s", report)
	}
	return lines
}

// deviceTestRegistry is the builtin registry plus "cpuonly", a pixel stage without a GPU
// implementation, so that the planner has something to split on.
func deviceTestRegistry(t testing.TB) *pipeline.Registry {
	t.Helper()
	cpuonly := &pipeline.StageDef{Name: "cpuonly", Kind: pipeline.PixelKind, Help: "a stage with no kernel",
		Shape: sameShape,
		CPU: func(pipeline.Params) (pipeline.CPUFunc, error) {
			return func(dst, src *stages.Image, _ *[256]uint64) { copy(dst.Pix, src.Pix) }, nil
		}}
	r, err := pipeline.NewRegistry(decodeDef, grayscaleDef, blurDef, boxBlurDef, transposeDef, histogramDef, saveDef, cpuonly)
	if err != nil {
		t.Fatal(err)
	}
	return r
}
