package pipeline

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/imgpipe/imgpipe/stages"
	"github.com/imgpipe/imgpipe/stages/npy"
)

var (
	f32NaN = float32(math.NaN())
	f32Inf = float32(math.Inf(1))
)

func npyBytes(t *testing.T, shape []int, data []float32) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := npy.Write(&b, &npy.Array{Shape: shape, Data: data}); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func mustArrayPlan(t *testing.T, spec string) *Plan {
	t.Helper()
	steps, err := ParseSpec(spec)
	if err != nil {
		t.Fatal(err)
	}
	plan, err := Compile(steps)
	if err != nil {
		t.Fatal(err)
	}
	return plan
}

func sameBits(a, b float32) bool {
	return math.Float32bits(a) == math.Float32bits(b) || (a != a && b != b)
}

// The array chain against references written numpy-style: y = float32(x*2.5) - 1 per
// element (numpy: (x.astype(f4) * f4(2.5)) + f4(-1)), then sum, min and max of y.
func TestArrayChain(t *testing.T) {
	plan := mustArrayPlan(t, "load | scale factor=2.5 | add value=-1 | sum | min | max | save format=npy")
	tests := []struct {
		name          string
		shape         []int
		in, want      []float32
		sum, min, max float32
		err           string
	}{
		{"0-d", []int{}, []float32{2}, []float32{4}, 4, 4, 4, ""},
		{"1xN", []int{1, 4}, []float32{0, 1, -2, 0.4}, []float32{-1, 1.5, -6, 0}, -5.5, -6, 1.5, ""},
		{"2x3", []int{2, 3}, []float32{1, 2, 3, 4, 5, 6}, []float32{1.5, 4, 6.5, 9, 11.5, 14}, 46.5, 1.5, 14, ""},
		{"nan and inf", []int{3}, []float32{f32NaN, f32Inf, 0}, []float32{f32NaN, f32Inf, -1}, f32NaN, f32NaN, f32NaN, ""},
		{"zero-length axis", []int{3, 0}, []float32{}, nil, 0, 0, 0, "min: array has no elements"},
	}
	var in []Input
	for _, tt := range tests {
		in = append(in, Input{Name: tt.name + ".npy", Data: npyBytes(t, tt.shape, tt.in)})
	}
	sink := Collect()
	if _, err := Run(context.Background(), plan, Inputs(in...), sink, Options{Workers: 2}); err != nil {
		t.Fatal(err)
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := sink.Results[i]
			if tt.err != "" {
				if r.Status != StatusFailed || r.Err == nil || r.Err.Error() != tt.err {
					t.Fatalf("status %s, error %v; want failed with %q", r.Status, r.Err, tt.err)
				}
				return
			}
			if r.Status != StatusOK {
				t.Fatalf("status %s: %v", r.Status, r.Err)
			}
			got, err := npy.Read(bytes.NewReader(r.Encoded), 1<<20)
			if err != nil {
				t.Fatal(err)
			}
			if len(got.Shape) != len(tt.shape) || len(got.Data) != len(tt.want) {
				t.Fatalf("saved shape %v with %d elements, want %v", got.Shape, len(got.Data), tt.shape)
			}
			for j := range tt.want {
				if !sameBits(got.Data[j], tt.want[j]) {
					t.Errorf("element %d = %v, want %v", j, got.Data[j], tt.want[j])
				}
			}
			want := []Reduction{{stageSum, tt.sum}, {stageMin, tt.min}, {stageMax, tt.max}}
			if len(r.Reductions) != len(want) {
				t.Fatalf("reductions %v, want %v", r.Reductions, want)
			}
			for j, w := range want {
				if g := r.Reductions[j]; g.Stage != w.Stage || !sameBits(g.Value, w.Value) {
					t.Errorf("reduction %d = %v, want %v", j, g, w)
				}
			}
			if r.Encoder != "npy-float32" {
				t.Errorf("encoder %q", r.Encoder)
			}
		})
	}
}

// Bad files fail alone, each with a clear error, and the run goes on.
func TestArrayBadInputs(t *testing.T) {
	good := npyBytes(t, []int{2}, []float32{1, 2})
	f8 := bytes.Replace(good, []byte("'<f4'"), []byte("'<f8'"), 1)
	fortran := bytes.Replace(good, []byte("False"), []byte("True "), 1)
	tests := []struct {
		name string
		in   Input
		err  string
	}{
		{"not npy", Input{Name: "a.npy", Data: []byte("PK\x03\x04 zip")}, "no \\x93NUMPY magic"},
		{"float64", Input{Name: "b.npy", Data: f8}, "only little-endian float32"},
		{"fortran", Input{Name: "c.npy", Data: fortran}, "only C order"},
		{"short data", Input{Name: "d.npy", Data: good[:len(good)-1]}, "unexpected EOF"},
		{"too many elements", Input{Name: "e.npy", Data: npyBytes(t, []int{5}, make([]float32, 5))}, "more than 4 elements"},
		{"image input", Input{Name: "f", Image: stages.NewImage(1, 1, 1)}, "input is an image"},
		{"good", Input{Name: "g.npy", Data: good}, ""},
	}
	var in []Input
	for _, tt := range tests {
		in = append(in, tt.in)
	}
	sink := Collect()
	sum, err := Run(context.Background(), mustArrayPlan(t, "load max_elements=4 | sum"), Inputs(in...), sink, Options{Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	if sum.OK != 1 || sum.Failed != len(tests)-1 {
		t.Errorf("summary ok %d failed %d", sum.OK, sum.Failed)
	}
	for i, tt := range tests {
		r := sink.Results[i]
		if tt.err == "" {
			if r.Status != StatusOK || len(r.Reductions) != 1 || r.Reductions[0].Value != 3 {
				t.Errorf("%s: %s %v %v", tt.name, r.Status, r.Err, r.Reductions)
			}
			continue
		}
		if r.Status != StatusFailed || r.Err == nil || !strings.HasPrefix(r.Err.Error(), "load: ") || !strings.Contains(r.Err.Error(), tt.err) {
			t.Errorf("%s: status %s, error %v; want load failing with %q", tt.name, r.Status, r.Err, tt.err)
		}
	}
}

// Pixel stages refuse arrays and array stages refuse images, at plan time.
func TestArrayCompileErrors(t *testing.T) {
	tests := []struct{ spec, err string }{
		{"load | grayscale", "col 8: stage grayscale takes images, but load gives float32 arrays"},
		{"decode | scale factor=2", "col 10: stage scale takes float32 arrays: start the chain with load"},
		{"load | sum | sum", "col 14: a chain holds sum at most once"},
		{"load | save format=png", "col 8: save format=png cannot write float32 arrays: use format=npy"},
		{"sum | save format=npy", "col 1: the chain must start with decode or load, not sum"},
		{"load | add value=inf", "value"},
		{"load max_elements=0 | sum", "max_elements"},
	}
	for _, tt := range tests {
		t.Run(tt.spec, func(t *testing.T) {
			steps, err := ParseSpec(tt.spec)
			if err == nil {
				_, err = Compile(steps)
			}
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("error %v, want one containing %q", err, tt.err)
			}
		})
	}
}

// The report line carries the shape ([] for 0-d) and the reductions, NaN and Inf as
// strings, and reads back to the same bits.
func TestArrayReportLine(t *testing.T) {
	tests := []struct {
		name  string
		res   Result
		json  string
		shape []int
	}{
		{"0-d", Result{Input: "a.npy", Status: StatusOK, Shape: []int{}, Reductions: []Reduction{{"sum", 0.1}}},
			`"shape":[],"reductions":{"sum":0.1}`, []int{}},
		{"special", Result{Input: "b.npy", Status: StatusOK, Shape: []int{2, 0},
			Reductions: []Reduction{{"max", f32Inf}, {"min", float32(math.Inf(-1))}, {"sum", f32NaN}}},
			`"shape":[2,0],"reductions":{"max":"Infinity","min":"-Infinity","sum":"NaN"}`, []int{2, 0}},
		{"image", Result{Input: "c.png", Status: StatusOK, Width: 1, Height: 1}, `"width":1`, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := tt.res.Line()
			b, err := json.Marshal(l)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(b), tt.json) || (tt.shape == nil && strings.Contains(string(b), "shape")) {
				t.Errorf("line %s, want it to hold %s", b, tt.json)
			}
			var back ReportLine
			if err := json.Unmarshal(b, &back); err != nil {
				t.Fatal(err)
			}
			if got := back.shape(); (got == nil) != (tt.shape == nil) || len(got) != len(tt.shape) {
				t.Errorf("shape read back %v, want %v", got, tt.shape)
			}
			reds := back.reductions()
			for i, want := range tt.res.Reductions {
				if reds[i].Stage != want.Stage || !sameBits(reds[i].Value, want.Value) {
					t.Errorf("reduction read back %v, want %v", reds[i], want)
				}
			}
		})
	}
	var f ReportFloat
	if err := json.Unmarshal([]byte(`"nan"`), &f); err == nil {
		t.Error("a bad report value was accepted")
	}
}

// A folder walk for a load chain takes the .npy files only, and save writes .npy outputs.
func TestArrayFolder(t *testing.T) {
	in, out := t.TempDir(), t.TempDir()
	for name, data := range map[string][]byte{
		"x.npy":     npyBytes(t, []int{2, 2}, []float32{1, 2, 3, 4}),
		"sub/y.npy": npyBytes(t, []int{1}, []float32{-1}),
		"z.png":     []byte("not taken"),
	} {
		p := filepath.Join(in, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	plan := mustArrayPlan(t, "load | scale factor=-1 | save format=npy")
	sum, err := Run(context.Background(), plan, FolderSelect(in, Selection{Exts: plan.InputExts()}), ToFolder(out), Options{Workers: 2})
	if err != nil || sum.OK != 2 || sum.Failed != 0 {
		t.Fatalf("run: %+v, %v", sum, err)
	}
	f, err := os.Open(filepath.Join(out, "x.npy"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	a, err := npy.Read(f, 16)
	if err != nil || len(a.Data) != 4 || a.Data[3] != -4 || a.Shape[0] != 2 {
		t.Errorf("x.npy: %v, %v", a, err)
	}
	if _, err := os.Stat(filepath.Join(out, "sub", "y.npy")); err != nil {
		t.Error(err)
	}
	if mustArrayPlan(t, "decode | save").InputExts() != nil {
		t.Error("an image chain changes the default extensions")
	}
}
