package pipeline

import (
	"cmp"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/imgpipe/imgpipe/stages"
	"github.com/imgpipe/imgpipe/stages/stagestest"
)

func noopCPU(Params) (CPUFunc, error) {
	return func(dst, src *stages.Image, _ *[256]uint64) {}, nil
}

func TestRegisterRefusesBadDefinitions(t *testing.T) {
	good := func() *StageDef {
		return &StageDef{Name: "thing", Kind: PixelKind, Help: "h", Shape: sameShape, CPU: noopCPU}
	}
	tests := []struct {
		name string
		mod  func(d *StageDef)
		want string
	}{
		{"bad name", func(d *StageDef) { d.Name = "Thing" }, "must match"},
		{"empty name", func(d *StageDef) { d.Name = "" }, "must match"},
		{"no help", func(d *StageDef) { d.Help = "" }, "no help"},
		{"pixel without CPU", func(d *StageDef) { d.CPU = nil }, "needs Shape and either CPU or GPUOnly"},
		{"pixel without shape", func(d *StageDef) { d.Shape = nil }, "needs Shape and either CPU or GPUOnly"},
		{"source without decoder", func(d *StageDef) { d.Kind = SourceKind }, "exactly one of NewDecoder and NewLoader"},
		{"sink without encoder", func(d *StageDef) { d.Kind = SinkKind }, "without NewEncoder"},
		{"unknown kind", func(d *StageDef) { d.Kind = 7 }, "unknown kind"},
		{"histogram on a sink", func(d *StageDef) {
			d.Kind, d.Histogram = SinkKind, true
			d.NewEncoder = func(Params) (*Encoder, error) { return nil, nil }
		}, "only pixel stages"},
		{"GPU on a sink", func(d *StageDef) {
			d.Kind = SinkKind
			d.GPU = NoLaunchArgs
			d.NewEncoder = func(Params) (*Encoder, error) { return nil, nil }
		}, "only pixel and array stages have a GPU"},
		{"duplicate param", func(d *StageDef) {
			d.Params = []ParamSpec{{Name: "a", Kind: Bool, Default: true, Help: "h"}, {Name: "a", Kind: Bool, Default: true, Help: "h"}}
		}, "defined twice"},
		{"param without help", func(d *StageDef) {
			d.Params = []ParamSpec{{Name: "a", Kind: Bool, Default: true}}
		}, "no help"},
		{"default out of range", func(d *StageDef) {
			d.Params = []ParamSpec{{Name: "a", Kind: Int, Default: int64(5), Range: &Range{Min: 0, Max: 3}, Help: "h"}}
		}, "out of range"},
		{"default of wrong type", func(d *StageDef) {
			d.Params = []ParamSpec{{Name: "a", Kind: Int, Default: 5, Help: "h"}}
		}, "want an int64"},
		{"enum without values", func(d *StageDef) {
			d.Params = []ParamSpec{{Name: "a", Kind: Enum, Default: "x", Help: "h"}}
		}, "without values"},
		{"range on a bool", func(d *StageDef) {
			d.Params = []ParamSpec{{Name: "a", Kind: Bool, Default: true, Range: &Range{}, Help: "h"}}
		}, "range on a bool"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := good()
			tt.mod(d)
			_, err := NewRegistry(d)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want an error containing %q", err, tt.want)
			}
		})
	}
	if _, err := NewRegistry(good(), good()); err == nil || !strings.Contains(err.Error(), "registered twice") {
		t.Errorf("duplicate stage: %v", err)
	}
	if _, err := NewRegistry(good()); err != nil {
		t.Errorf("good definition refused: %v", err)
	}
}

// TestBuiltinRegistry checks Builtin against what registers into it: every stage file
// (stage_<name>.go) registers its stage, and Stages lists them in the documented order
// (sources, pixel stages, sinks, array stages, each by name) that `imgpipe stages` prints.
func TestBuiltinRegistry(t *testing.T) {
	defs := Builtin.Stages()
	files, err := filepath.Glob("stage_*.go")
	if err != nil || len(files) == 0 {
		t.Fatalf("stage files: %v, %v", files, err)
	}
	for _, f := range files {
		name := strings.TrimSuffix(strings.TrimPrefix(f, "stage_"), ".go")
		if strings.HasSuffix(name, "_test") {
			continue
		}
		if _, ok := Builtin.Lookup(name); !ok {
			t.Errorf("%s registers no stage %s", f, name)
		}
	}
	sorted := slices.SortedFunc(slices.Values(defs), func(a, b *StageDef) int {
		return cmp.Or(cmp.Compare(a.Kind, b.Kind), strings.Compare(a.Name, b.Name))
	})
	if !slices.Equal(defs, sorted) {
		t.Errorf("Stages() is not in kind, then name order: %v", defs)
	}
	hist := 0
	for _, d := range defs {
		if d.Histogram {
			hist++
		}
		if d, ok := Builtin.Lookup(d.Name); !ok || d == nil {
			t.Errorf("Lookup(%s) failed", d.Name)
		}
	}
	if hist != 1 {
		t.Errorf("%d histogram stages", hist)
	}
	if _, ok := Builtin.Lookup("nope"); ok {
		t.Error("Lookup(nope) succeeded")
	}
}

// The declared shapes must be the shapes the CPU implementations produce and accept.
func TestBuiltinShapes(t *testing.T) {
	tests := []struct {
		stage       string
		in, want    stages.Shape
		passThrough bool
	}{
		{"grayscale", stages.Shape{W: 5, H: 3, C: 3}, stages.Shape{W: 5, H: 3, C: 1}, false},
		{"grayscale", stages.Shape{W: 5, H: 3, C: 1}, stages.Shape{W: 5, H: 3, C: 1}, true},
		{"blur", stages.Shape{W: 5, H: 3, C: 3}, stages.Shape{W: 5, H: 3, C: 3}, false},
		{"boxblur", stages.Shape{W: 5, H: 3, C: 1}, stages.Shape{W: 5, H: 3, C: 1}, false},
		{"transpose", stages.Shape{W: 5, H: 3, C: 3}, stages.Shape{W: 3, H: 5, C: 3}, false},
		{"histogram", stages.Shape{W: 5, H: 3, C: 3}, stages.Shape{W: 5, H: 3, C: 3}, true},
	}
	for _, tt := range tests {
		d, _ := Builtin.Lookup(tt.stage)
		got, passThrough := d.Shape(tt.in, defaults(d))
		if got != tt.want || passThrough != tt.passThrough {
			t.Errorf("%s %v: got %v passThrough=%v, want %v passThrough=%v", tt.stage, tt.in, got, passThrough, tt.want, tt.passThrough)
		}
	}
}

func TestNewParams(t *testing.T) {
	blur, _ := Builtin.Lookup("blur")
	box, _ := Builtin.Lookup("boxblur")
	save, _ := Builtin.Lookup("save")
	tests := []struct {
		def     *StageDef
		args    map[string]any
		wantErr string
		canon   string
	}{
		{blur, nil, "", ""},
		{blur, map[string]any{"sigma": 2.0}, "", "sigma=2"},
		{blur, map[string]any{"sigma": 2}, "", "sigma=2"}, // an int for a float
		{blur, map[string]any{"sigma": float32(0.5)}, "", "sigma=0.5"},
		{blur, map[string]any{"sigma": "2"}, "want a float, got string", ""},
		{blur, map[string]any{"sigma": -1.0}, "out of range", ""},
		{blur, map[string]any{"sigmaa": 1.0}, `did you mean "sigma"`, ""},
		{box, map[string]any{"radius": 3}, "", "radius=3"},
		{box, map[string]any{"radius": 3.0}, "", "radius=3"}, // a whole float for an int
		{box, map[string]any{"radius": 3.5}, "want an integer", ""},
		{box, map[string]any{"radius": true}, "want a int, got bool", ""},
		{save, map[string]any{"format": "jpeg", "quality": 50}, "", "format=jpeg quality=50"},
		{save, map[string]any{"format": "gif", "quality": 500}, "want one of png, jpeg", ""},
	}
	for _, tt := range tests {
		p, err := NewParams(tt.def, tt.args)
		switch {
		case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
			t.Errorf("%s %v: error %v, want %q", tt.def.Name, tt.args, err, tt.wantErr)
		case tt.wantErr == "" && err != nil:
			t.Errorf("%s %v: %v", tt.def.Name, tt.args, err)
		case tt.wantErr == "" && p.String() != tt.canon:
			t.Errorf("%s %v: String() = %q, want %q", tt.def.Name, tt.args, p.String(), tt.canon)
		}
	}
	// Both problems of the last case are reported.
	_, err := NewParams(save, map[string]any{"format": "gif", "quality": 500})
	if n := len(Errors(err)); n != 2 {
		t.Errorf("got %d errors, want 2: %v", n, err)
	}
}

func TestParamsAccessorsPanicOnUnknownNames(t *testing.T) {
	blur, _ := Builtin.Lookup("blur")
	defer func() {
		if recover() == nil {
			t.Error("no panic")
		}
	}()
	defaults(blur).Int("radius")
}

func TestDecoderHead(t *testing.T) {
	dec, err := decodeDef.NewDecoder(defaults(decodeDef))
	if err != nil {
		t.Fatal(err)
	}
	png := stagestest.Encode(t, stages.NewImage(300, 200, 3), "png")
	tests := []struct {
		head []byte
		want error
	}{
		{nil, nil},              // Decode reports the empty file
		{[]byte("GIF89a"), nil}, // a format, header cut short: read on
		{png[:40], nil},         // a header within the limit
		{[]byte("not an image"), stages.ErrUnknownFormat},
	}
	for _, tt := range tests {
		if err := dec.Head(tt.head); !errors.Is(err, tt.want) || (tt.want == nil && err != nil) {
			t.Errorf("Head(%q) = %v, want %v", tt.head, err, tt.want)
		}
	}
	small, _ := decodeDef.NewDecoder(mustParams(t, decodeDef, Args{"max_pixels": 1000}))
	if err := small.Head(png[:40]); !errors.Is(err, stages.ErrTooLarge) {
		t.Errorf("over the limit: %v", err)
	}
}

func mustParams(t *testing.T, d *StageDef, args Args) Params {
	t.Helper()
	p, err := NewParams(d, args)
	if err != nil {
		t.Fatal(err)
	}
	return p
}
