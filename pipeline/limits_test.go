package pipeline

import (
	"context"
	"errors"
	"math/rand"
	"strings"
	"testing"

	"github.com/imgpipe/imgpipe/stages"
	"github.com/imgpipe/imgpipe/stages/stagestest"
)

// Plan.Check walks an input's shape through the chain before it is decoded: the largest
// image along it, which the memory budget charges, or a stage's refusal.
func TestPlanCheck(t *testing.T) {
	for _, tc := range []struct {
		spec    string
		in      stages.Shape
		most    int64
		refused string // the stage that refuses, if one does
	}{
		{spec: "decode | grayscale | blur sigma=2", in: stages.Shape{W: 40, H: 30, C: 3}, most: 1200},
		{spec: "decode | resize width=400 | crop width=10 height=10", in: stages.Shape{W: 100, H: 50, C: 3}, most: 80000},
		{spec: "decode | resize width=10 | resize width=16384 height=16384", in: stages.Shape{W: 100, H: 50, C: 3}, most: 16384 * 16384},
		{spec: "decode | resize width=16384 height=1", in: stages.Shape{W: 1, H: 1000, C: 3}, most: 16384},
		{spec: "decode | resize width=16384 height=1", in: stages.Shape{W: 1, H: 1_000_000, C: 3}, refused: "resize"},
		{spec: "decode | rotate angle=90 | resize width=16384 height=1", in: stages.Shape{W: 1_000_000, H: 1, C: 3}, refused: "resize"},
		{spec: "decode | resize width=16384 height=1", in: stages.Shape{W: 1_000_000, H: 1, C: 3}, most: 1_000_000},
	} {
		most, err := compileWith(t, Builtin, tc.spec).Check(tc.in)
		var se *StageError
		switch {
		case tc.refused == "" && (err != nil || most != tc.most):
			t.Errorf("%s over %v: %d, %v; want %d", tc.spec, tc.in, most, err, tc.most)
		case tc.refused != "" && (!errors.As(err, &se) || se.Stage != tc.refused || !strings.Contains(err.Error(), "multiply-adds")):
			t.Errorf("%s over %v: %d, %v; want %s's refusal", tc.spec, tc.in, most, err, tc.refused)
		}
	}
}

// A tiny file whose resize would run away fails alone, in the stage that refuses it,
// before it is decoded; the run goes on. (A 1×1,000,000 PNG is 4 KB; resizing it to
// 16384×1 would take 10^11 multiply-adds, and took 98 GB of rows before the working set
// was bounded.)
func TestRunRefusesRunawayResize(t *testing.T) {
	tall := stagestest.Encode(t, stages.NewImage(1, 1_000_000, 3), "png")
	fine := stagestest.Encode(t, stagestest.ReadImage(rand.New(rand.NewSource(1)), 30, 20, 3), "png")
	plan := compileWith(t, Builtin, "decode | resize width=16384 height=1")
	sink := Collect()
	sum, err := Run(context.Background(), plan, Inputs(Input{Name: "tall.png", Data: tall}, Input{Name: "fine.png", Data: fine}), sink, Options{Workers: 2})
	if err != nil || sum.OK != 1 || sum.Failed != 1 {
		t.Fatalf("Run = %+v, %v; want 1 ok, 1 failed", sum, err)
	}
	for _, res := range sink.Results {
		var se *StageError
		if res.Input == "tall.png" && (!errors.As(res.Err, &se) || se.Stage != "resize" || !strings.Contains(se.Error(), "resize: 1x1000000 to 16384x1 would take")) {
			t.Errorf("tall.png: %v; want resize's refusal", res.Err)
		}
	}
	// Pixels given as the input are checked the same way.
	sum, err = Run(context.Background(), plan, Inputs(Input{Name: "tall", Image: stages.NewImage(1, 1_000_000, 3)}), Collect(), Options{})
	if err != nil || sum.Failed != 1 {
		t.Errorf("pixels as input: %+v, %v; want 1 failed", sum, err)
	}
}

// The budget charges the chain's largest image, not only the decoded one: a resize that
// enlarges is charged for its output.
func TestDecodeNeedChain(t *testing.T) {
	png := stagestest.Encode(t, stagestest.ReadImage(rand.New(rand.NewSource(3)), 40, 30, 3), "png")
	for _, tc := range []struct {
		spec   string
		pixels int64
	}{
		{"decode | blur sigma=1", 40 * 30},
		{"decode | resize width=4000", 4000 * 3000},
		{"decode | resize width=4000 | resize width=20", 4000 * 3000},
	} {
		r := &Runner{plan: compileWith(t, Builtin, tc.spec)}
		c, err := r.plan.Decode.Cost(png, int64(len(png)))
		if err != nil {
			t.Fatal(err)
		}
		got, _, err := r.decodeNeed(png, int64(len(png)), false)
		if want := int64(len(png)) + c.WorkBytes + tc.pixels*ChainBytesPerPixel; err != nil || got != want {
			t.Errorf("%s: charged %d, %v; want %d", tc.spec, got, err, want)
		}
	}
}
