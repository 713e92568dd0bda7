package sourcemodule

import (
	"strings"
	"testing"

	"github.com/imgpipe/imgpipe/cudastage/nvrtc"
	"github.com/imgpipe/imgpipe/cudastage/userkernel"
	"github.com/imgpipe/imgpipe/pipeline"
)

const invertSrc = `extern "C" __global__ void invert(const unsigned char *in, unsigned char *out,
    int width, int height, int channels, int in_pitch, int out_pitch,
    int in_width, int in_height, int in_channels) {
    int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= width || y >= height) return;
    for (int c = 0; c < channels; c++)
        out[y * out_pitch + x * channels + c] = 255 - in[y * in_pitch + x * in_channels + c];
}
`

func TestStageArgs(t *testing.T) {
	params := []userkernel.Scalar{{Float: true, F: 1.5}, {I: 3}, {Float: true, F: 2}}
	got := StageArgs("src", "f", userkernel.OutGray, params...)
	want := pipeline.Args{"source": "src", "fn": "f", "out": "gray", "args": "1.5,3,2f"}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
	back, err := userkernel.ParseArgs(got["args"].(string))
	if err != nil || len(back) != len(params) {
		t.Fatalf("args do not parse back: %v, %v", back, err)
	}
	for i := range params {
		if back[i] != params[i] {
			t.Errorf("arg %d: %+v, want %+v", i, back[i], params[i])
		}
	}
}

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
		{"good kernel", invertSrc, "invert", ""},
		{"missing function", invertSrc, "nope", "defines no kernel nope"},
		{"compile error", "extern \"C\" __global__ void k() {\n  int x = ;\n}\n", "k", "source:2"},
		{"bad function name", invertSrc, "9x", `fn="9x"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := pipeline.New().Decode().Then("kernel", StageArgs(tt.source, tt.fn, userkernel.OutSame)).Save("png")
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
