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
		// Values that only fail together are checked when binding, with the rest.
		{spec: "decode | resize fit=inside | save", errs: []string{"col 10: resize: give width, height or both"}},
		{spec: "decode | crop x=1 gravity=center", errs: []string{"col 10: crop: give either x, y or gravity=center, not both"}},
		{spec: "decode scale=auto | blur | save", errs: []string{"col 1: decode scale=auto needs a resize right after it"}},
		// A stage that fails to parse is reported with the chain's own problems in one
		// pass, in the order of the text...
		{spec: "blur sigma=0 | decode | resize | save format=x | grayscale", errs: []string{
			"col 1: the chain must start with decode or load, not blur",
			"col 12: blur: sigma=0 is out of range",
			"col 16: decode must be the first stage, not stage 2",
			"col 25: resize: give width, height or both",
			"col 34: save must be the last stage",
			"col 46: save: format=x: want one of",
		}},
		{spec: "load | grayscale x=1 | sum | sum", errs: []string{
			"col 8: stage grayscale takes images, but load gives float32 arrays",
			"col 18: grayscale has no parameter \"x\"",
			"col 30: a chain holds sum at most once",
		}},
		// ...without echoes: an unknown stage may be the source or the resize meant, a
		// trailing '|' is no stage after save, and a stage that failed is not bound.
		{spec: "decod | blur | save", errs: []string{`col 1: unknown stage "decod" (did you mean "decode"?)`}},
		{spec: "| decode | save", errs: []string{"col 1: empty stage before '|'"}},
		{spec: "decode | save |", errs: []string{"col 16: nothing after the last '|'"}},
		{spec: "decode scale=auto | resize width=-3 | save", errs: []string{"col 34: resize: width=-3 is out of range"}},
		{spec: "decode scale=auto | resiz width=3 | save", errs: []string{`col 21: unknown stage "resiz"`}},
		{spec: "decode | resize filter=cubic | save", errs: []string{"col 24: resize: filter=cubic: want one of"}},
	}
	for _, tt := range tests {
		t.Run(tt.spec, func(t *testing.T) {
			plan, err := CompileSpec(tt.spec)
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
	if _, err := CompileSpec(" "); err == nil || !strings.Contains(err.Error(), "empty pipeline spec") {
		t.Errorf("empty spec: %v", err)
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
