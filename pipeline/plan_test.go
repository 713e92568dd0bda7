package pipeline

import (
	"errors"
	"strings"
	"testing"

	"github.com/imgpipe/imgpipe/stages"
)

func mustSteps(t *testing.T, spec string) []Step {
	t.Helper()
	steps, err := ParseSpec(spec)
	if err != nil {
		t.Fatalf("ParseSpec(%q): %v", spec, err)
	}
	return steps
}

func TestCompile(t *testing.T) {
	tests := []struct {
		spec   string
		errs   []string // one substring per expected error, in order
		pixels int
		save   bool
	}{
		{spec: "decode", pixels: 0},
		{spec: "decode | save", save: true},
		{spec: "decode | grayscale | blur sigma=1.5 | transpose | histogram | save format=png", pixels: 4, save: true},
		{spec: "decode | histogram", pixels: 1},
		{spec: "grayscale | save", errs: []string{"col 1: the chain must start with decode or load, not grayscale"}},
		{spec: "save", errs: []string{"must start with decode or load, not save"}},
		{spec: "decode | save | grayscale", errs: []string{"col 10: save must be the last stage"}},
		{spec: "decode | decode", errs: []string{"col 10: decode must be the first stage, not stage 2"}},
		{spec: "decode | histogram | transpose | histogram", errs: []string{"col 34: a chain holds at most one histogram stage (the report has one histogram per input); histogram is already at col 10"}},
		// Every error, not just the first.
		{spec: "blur | decode | save | histogram | histogram", errs: []string{
			"col 1: the chain must start with decode or load, not blur",
			"col 8: decode must be the first stage",
			"col 17: save must be the last stage",
			"col 36: a chain holds at most one histogram stage",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.spec, func(t *testing.T) {
			plan, err := Compile(mustSteps(t, tt.spec))
			if len(tt.errs) == 0 {
				if err != nil {
					t.Fatal(err)
				}
				if len(plan.Pixels) != tt.pixels || (plan.Save != nil) != tt.save || plan.Decode == nil {
					t.Errorf("plan: %d pixel stages, save %v, decode %v", len(plan.Pixels), plan.Save != nil, plan.Decode != nil)
				}
				if plan.String() != FormatSpec(mustSteps(t, tt.spec)) {
					t.Errorf("String() = %q", plan.String())
				}
				return
			}
			if err == nil {
				t.Fatal("no error")
			}
			got, want := Errors(err), tt.errs
			if len(got) != len(want) {
				t.Fatalf("got %d errors, want %d:\n%v", len(got), len(want), err)
			}
			for i, w := range want {
				if !strings.Contains(got[i].Error(), w) {
					t.Errorf("error %d = %q, want %q", i, got[i], w)
				}
			}
		})
	}
	if _, err := Compile(nil); err == nil || !strings.Contains(err.Error(), "empty chain") {
		t.Errorf("empty chain: %v", err)
	}
}

func TestCompileHandBuiltSteps(t *testing.T) {
	dec, _ := Builtin.Lookup("decode")
	blur, _ := Builtin.Lookup("blur")
	// A Step with only its definition means all defaults.
	plan, err := Compile([]Step{{Def: dec}, {Def: blur}})
	if err != nil {
		t.Fatal(err)
	}
	if plan.Pixels[0].Params.Float("sigma") != 1 {
		t.Error("default sigma not filled in")
	}
	// Parameters of another stage, or out-of-range values slipped in by hand, are caught.
	bad := defaults(blur)
	bad.vals["sigma"] = 99.0
	_, err = Compile([]Step{{Def: dec}, {Def: blur, Params: bad}})
	if err == nil || !strings.Contains(err.Error(), "out of range") {
		t.Errorf("out-of-range value: %v", err)
	}
	_, err = Compile([]Step{{Def: dec}, {Def: blur, Params: defaults(dec)}})
	if err == nil || !strings.Contains(err.Error(), "parameters of decode given to blur") {
		t.Errorf("foreign params: %v", err)
	}
	other := &StageDef{Name: "blur", Kind: PixelKind, Help: "h", Shape: sameShape, CPU: noopCPU}
	_, err = Compile([]Step{{Def: dec}, {Def: other}})
	if err == nil || !strings.Contains(err.Error(), "not in this registry") {
		t.Errorf("foreign definition: %v", err)
	}
	_, err = Compile([]Step{{Def: dec}, {}})
	if err == nil || !strings.Contains(err.Error(), "stage 2 has no definition") {
		t.Errorf("nil definition: %v", err)
	}
	var pe *PosError
	if errors.As(err, &pe) {
		t.Errorf("a step without position should not claim one: %v", pe)
	}
}

func TestPlanShapes(t *testing.T) {
	plan, err := Compile(mustSteps(t, "decode | grayscale | blur | transpose | histogram | save"))
	if err != nil {
		t.Fatal(err)
	}
	if got := plan.OutShape(stages.Shape{W: 1920, H: 1080, C: 3}); got != (stages.Shape{W: 1080, H: 1920, C: 1}) {
		t.Errorf("OutShape = %v", got)
	}
	if !plan.HasHistogram() {
		t.Error("HasHistogram = false")
	}
	if plan.Save.Ext != "png" {
		t.Errorf("ext = %q", plan.Save.Ext)
	}
	plan, _ = Compile(mustSteps(t, "decode | save format=jpeg"))
	if plan.Save.Ext != "jpg" || plan.HasHistogram() {
		t.Errorf("jpeg plan: ext %q, histogram %v", plan.Save.Ext, plan.HasHistogram())
	}
}

func TestDecodeBackend(t *testing.T) {
	if _, err := Compile(mustSteps(t, "decode backend=go | save")); err != nil {
		t.Fatalf("backend=go: %v", err)
	}
	_, err := Compile(mustSteps(t, "decode backend=turbo | save"))
	switch why := stages.JPEGTurbo.Check(); {
	case why == nil && err != nil:
		t.Fatalf("libjpeg-turbo loads here, but backend=turbo failed: %v", err)
	case why != nil && (err == nil || !strings.Contains(err.Error(), why.Error())):
		t.Fatalf("libjpeg-turbo is unavailable (%v), but backend=turbo gave %v", why, err)
	}
}
