package kernelstage

import (
	"fmt"
	"strings"
	"testing"

	"github.com/imgpipe/imgpipe/cudastage/cutest"
	"github.com/imgpipe/imgpipe/cudastage/nvrtc"
	"github.com/imgpipe/imgpipe/cudastage/sourcemodule"
	"github.com/imgpipe/imgpipe/cudastage/userkernel"
	"github.com/imgpipe/imgpipe/pipeline"
	"github.com/imgpipe/imgpipe/pipeline/gpu"
	"github.com/imgpipe/imgpipe/stages"
)

// The kernel stage from a kernel compiled in Go (sourcemodule.StageArgs).

// invertModuleSrc inverts every sample, with no parameters after the convention's.
const invertModuleSrc = `extern "C" __global__ void invert(const unsigned char *in, unsigned char *out,
    int width, int height, int channels, int in_pitch, int out_pitch,
    int in_width, int in_height, int in_channels) {
    int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= width || y >= height) return;
    for (int c = 0; c < channels; c++)
        out[y * out_pitch + x * channels + c] = 255 - in[y * in_pitch + x * in_channels + c];
}
`

// A stage built from kernel source is checked when the pipeline is planned:
// NVRTC compiles it (this needs libnvrtc, not a GPU) and the function must
// exist; then a GPU must be usable.
func TestStageArgsPlan(t *testing.T) {
	if _, err := nvrtc.Probe(); err != nil {
		t.Skipf("no NVRTC: %v", err)
	}
	t.Setenv("XDG_CACHE_HOME", t.TempDir()) // the compile cache, kept out of the user's
	tests := []struct {
		name, source, fn string
		want             string // "" for a plan that succeeds where a GPU is usable
	}{
		{"good kernel", invertModuleSrc, "invert", ""},
		{"missing function", invertModuleSrc, "nope", "defines no kernel nope"},
		{"compile error", "extern \"C\" __global__ void k() {\n  int x = ;\n}\n", "k", "source:2"},
		{"bad function name", invertModuleSrc, "9x", `fn="9x"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := pipeline.New().Decode().Then("kernel", sourcemodule.StageArgs(tt.source, tt.fn, userkernel.OutSame)).Save("png")
			_, err := p.Plan()
			switch {
			case tt.want != "":
				if err == nil || !strings.Contains(err.Error(), tt.want) {
					t.Errorf("got %v, want %q", err, tt.want)
				}
			case err != nil && !strings.Contains(err.Error(), "runs only on a GPU"):
				t.Errorf("good kernel: %v", err)
			}
		})
	}
}

// A pipeline stage built from a compiled kernel runs on the Context's GPU
// and equals the CPU's inversion byte for byte, on odd sizes.
func TestGPUStageFromModule(t *testing.T) {
	ord := cutest.Require(t)
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	c, err := sourcemodule.Open(ord, sourcemodule.Config{HostBytes: 64 << 20, DeviceBytes: 64 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Error(err)
		}
	})
	mod, err := c.Compile("invert.cu", invertModuleSrc)
	if err != nil {
		t.Fatal(err)
	}
	var inputs []pipeline.Input
	var want []*stages.Image
	for i, s := range []stages.Shape{{W: 1, H: 1, C: 3}, {W: 17, H: 5, C: 3}, {W: 64, H: 33, C: 1}} {
		m := stages.NewImage(s.W, s.H, s.C)
		inv := stages.NewImage(s.W, s.H, s.C)
		for y := range s.H {
			for x := range m.Row(y) {
				m.Row(y)[x] = byte(7*x + 13*y + i)
				inv.Row(y)[x] = 255 - m.Row(y)[x]
			}
		}
		inputs = append(inputs, pipeline.Input{Name: fmt.Sprintf("%d.raw", i), Image: m})
		want = append(want, inv)
	}
	p := pipeline.New().Decode().Then("kernel", mod.StageArgs("invert", userkernel.OutSame)).
		WithOptions(pipeline.Options{Backend: &gpu.Options{Device: c.Device()}})
	sink := pipeline.Collect()
	if _, err := p.Run(t.Context(), pipeline.Inputs(inputs...), sink); err != nil {
		t.Fatal(err)
	}
	if len(sink.Results) != len(want) {
		t.Fatalf("%d results, want %d", len(sink.Results), len(want))
	}
	for i, r := range sink.Results {
		if r.Err != nil {
			t.Fatalf("%s: %v", r.Input, r.Err)
		}
		for y := range want[i].H {
			if string(r.Image.Row(y)) != string(want[i].Row(y)) {
				t.Fatalf("%s row %d differs", r.Input, y)
			}
		}
	}
}
