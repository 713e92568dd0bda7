package pipeline

import (
	"reflect"
	"strings"
	"testing"

	"github.com/imgpipe/imgpipe/cudastage/sched"
	"github.com/imgpipe/imgpipe/stages"
)

// Every builtin pixel stage has a GPU op, and the op is bound from the stage's definition:
// its name, canonical text with every parameter, histogram flag, launch arguments, output
// shape and CPU function.
func TestBuiltinGPUOps(t *testing.T) {
	tests := []struct {
		spec     string
		wantSpec string
		hist     bool
		args     sched.LaunchArgs
		out      stages.Shape // for a 7x5x3 input
	}{
		{"grayscale", "grayscale", false, nil, stages.Shape{W: 7, H: 5, C: 1}},
		{"blur sigma=1.5", "blur sigma=1.5", false, stages.BlurArgs{Taps: stages.BlurTaps(1.5)}, stages.Shape{W: 7, H: 5, C: 3}},
		{"blur", "blur sigma=1", false, stages.BlurArgs{Taps: stages.BlurTaps(1)}, stages.Shape{W: 7, H: 5, C: 3}},
		{"boxblur radius=3", "boxblur radius=3", false, stages.BoxBlurArgs{Radius: 3}, stages.Shape{W: 7, H: 5, C: 3}},
		{"transpose", "transpose", false, nil, stages.Shape{W: 5, H: 7, C: 3}},
		{"histogram", "histogram", true, nil, stages.Shape{W: 7, H: 5, C: 3}},
	}
	src := stages.NewImage(7, 5, 3)
	for i := range src.Pix {
		src.Pix[i] = byte(i * 37)
	}
	for _, tt := range tests {
		plan, err := Compile(mustSteps(t, "decode | "+tt.spec))
		if err != nil {
			t.Fatal(err)
		}
		ps := plan.Pixels[0]
		g := ps.GPU
		if g == nil {
			t.Errorf("%s: no GPU op", tt.spec)
			continue
		}
		if g.Name != ps.Def.Name || g.Spec != tt.wantSpec || g.Hist != tt.hist || !reflect.DeepEqual(g.Args, tt.args) {
			t.Errorf("%s: op %q %q hist=%v args=%v, want %q hist=%v args=%v", tt.spec, g.Name, g.Spec, g.Hist, g.Args, tt.wantSpec, tt.hist, tt.args)
		}
		if got := g.OutShape(src.Shape()); got != tt.out {
			t.Errorf("%s: OutShape = %v, want %v", tt.spec, got, tt.out)
		}
		// The op's CPU function is the step's.
		var want, got *stages.Image
		var wh, gh [256]uint64
		if !tt.hist {
			want, got = stages.NewImage(tt.out.W, tt.out.H, tt.out.C), stages.NewImage(tt.out.W, tt.out.H, tt.out.C)
		}
		ps.Run(want, src, &wh)
		g.CPU(got, src, &gh)
		if !reflect.DeepEqual(want, got) || wh != gh {
			t.Errorf("%s: the op's CPU function differs from the step's", tt.spec)
		}
	}
	for _, d := range Builtin.Stages() {
		if (d.GPU != nil) != (d.Kind == PixelKind || d.Kind == ArrayKind) {
			t.Errorf("stage %s (%s): GPU implementation set = %v", d.Name, d.Kind, d.GPU != nil)
		}
	}
}

// deviceTestRegistry is the builtin registry plus "cpuonly", a pixel stage without a GPU
// implementation, so that the planner has something to split on.
func deviceTestRegistry(t testing.TB) *Registry {
	t.Helper()
	cpuonly := &StageDef{Name: "cpuonly", Kind: PixelKind, Help: "a stage with no kernel",
		Shape: sameShape,
		CPU: func(Params) (CPUFunc, error) {
			return func(dst, src *stages.Image, _ *[256]uint64) { copy(dst.Pix, src.Pix) }, nil
		}}
	r, err := NewRegistry(decodeDef, grayscaleDef, blurDef, boxBlurDef, transposeDef, histogramDef, saveDef, cpuonly)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// A plan runs on a device only when every pixel stage has a kernel: DeviceOps gives the one
// device segment's ops, or fails (the GPU runner then runs the chain on the CPU).
func TestPlanDeviceOps(t *testing.T) {
	r := deviceTestRegistry(t)
	tests := []struct {
		spec      string
		deviceOps string // "" when DeviceOps must fail
	}{
		{"decode | save", ""},
		{"decode | grayscale | save", "grayscale"},
		{"decode | grayscale | blur sigma=1.5 | transpose | histogram | save", "grayscale | blur sigma=1.5 | transpose | histogram"},
		{"decode | cpuonly | save", ""},
		{"decode | grayscale | cpuonly | save", ""},
		{"decode | cpuonly | grayscale", ""},
		{"decode | grayscale | cpuonly | blur | histogram", ""},
		{"decode | cpuonly | cpuonly | histogram | transpose", ""},
	}
	for _, tt := range tests {
		t.Run(tt.spec, func(t *testing.T) {
			plan := compileWith(t, r, tt.spec)
			ops, err := plan.DeviceOps()
			if tt.deviceOps == "" {
				if err == nil {
					t.Errorf("DeviceOps = %v, want an error", ops)
				}
			} else if err != nil || sched.SegmentString(ops) != tt.deviceOps {
				t.Errorf("DeviceOps = %q, %v; want %q", sched.SegmentString(ops), err, tt.deviceOps)
			}
		})
	}
}

func TestDeviceOpsErrorsNameTheStage(t *testing.T) {
	r := deviceTestRegistry(t)
	plan := compileWith(t, r, "decode | grayscale | cpuonly | save")
	_, err := plan.DeviceOps()
	if err == nil || !strings.Contains(err.Error(), "col 22: stage cpuonly has no GPU implementation") {
		t.Errorf("got %v", err)
	}
	plan = compileWith(t, r, "decode | save")
	if _, err := plan.DeviceOps(); err == nil || !strings.Contains(err.Error(), "no pixel stage") {
		t.Errorf("no pixel stage: %v", err)
	}
}

func TestDeviceOpsOfSteps(t *testing.T) {
	r := deviceTestRegistry(t)
	tests := []struct {
		spec string
		want string   // the ops, or "" when it must fail
		errs []string // substrings of the errors, in order
	}{
		{spec: "grayscale | blur sigma=1.5 | transpose | histogram", want: "grayscale | blur sigma=1.5 | transpose | histogram"},
		{spec: "boxblur", want: "boxblur radius=1"},
		{spec: "blur", want: "blur sigma=1"},
		{spec: "decode | grayscale", errs: []string{"col 1: decode is a source stage"}},
		{spec: "grayscale | save", errs: []string{"col 13: save is a sink stage"}},
		{spec: "cpuonly | grayscale", errs: []string{"col 1: stage cpuonly has no GPU implementation"}},
		{spec: "histogram | histogram", errs: []string{"col 13: a chain holds at most one histogram stage"}},
		{spec: "decode | cpuonly | save", errs: []string{"source stage", "no GPU implementation", "sink stage"}},
	}
	for _, tt := range tests {
		t.Run(tt.spec, func(t *testing.T) {
			steps, err := r.ParseSpec(tt.spec)
			if err != nil {
				t.Fatal(err)
			}
			ops, err := DeviceOps(steps)
			if tt.want != "" {
				if err != nil || sched.SegmentString(ops) != tt.want {
					t.Fatalf("got %q, %v; want %q", sched.SegmentString(ops), err, tt.want)
				}
				return
			}
			got := Errors(err)
			if len(got) != len(tt.errs) {
				t.Fatalf("got %d errors (%v), want %d", len(got), err, len(tt.errs))
			}
			for i, w := range tt.errs {
				if !strings.Contains(got[i].Error(), w) {
					t.Errorf("error %d = %q, want %q in it", i, got[i], w)
				}
			}
		})
	}
	if _, err := DeviceOps(nil); err == nil {
		t.Error("empty chain accepted")
	}
	// A hand-built step with out-of-range parameters is refused, not passed to the device.
	bad := Step{Def: blurDef, Params: Params{def: blurDef, vals: map[string]any{"sigma": 99.0}}}
	if _, err := DeviceOps([]Step{bad}); err == nil || !strings.Contains(err.Error(), "out of range") {
		t.Errorf("bad sigma: %v", err)
	}
}
