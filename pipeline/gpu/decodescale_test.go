package gpu

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/imgpipe/imgpipe/pipeline"

	"github.com/imgpipe/imgpipe/cudastage/sched"
	"github.com/imgpipe/imgpipe/cudastage/sched/schedtest"
	"github.com/imgpipe/imgpipe/stages"
	"github.com/imgpipe/imgpipe/stages/jpegturbo"
	"github.com/imgpipe/imgpipe/stages/stagestest"
)

// TestDecodeScaleRun runs thumbnail chains over a JPEG and a PNG, on the CPU, on a fake GPU
// with nvJPEG only (where a JPEG that gets a scale decodes on CPU workers, and one that gets
// none on the device's decoder) and on one with turbo-cuda too (which decodes the JPEG, at
// its scale): the scale each input got is in its result and its report line (absent at full
// size), width and height are the decoded (scaled) size, the output is the size the full
// decode gives, and the outputs are the CPU run's bytes (the fake's decoders are the CPU's).
func TestDecodeScaleRun(t *testing.T) {
	jpg := stagestest.Encode(t, stagestest.Smooth(517, 389, 1), "jpeg")
	png := stagestest.Encode(t, stagestest.Smooth(517, 389, 2), "png")
	inputs := []pipeline.Input{{Name: "a.jpg", Data: jpg}, {Name: "b.png", Data: png}}
	turbo := jpegturbo.Available() == nil
	type want struct {
		w, h  int
		scale string
	}
	full := want{517, 389, ""}
	for _, tc := range []struct {
		spec     string
		jpeg     want // with libjpeg-turbo
		needsLib bool
	}{
		{"decode scale=auto | resize width=64 height=64 fit=inside | save", want{65, 49, "1/8"}, true},
		{"decode scale=1/2 | resize width=64 height=64 fit=inside | save", want{259, 195, "1/2"}, true},
		{"decode backend=turbo scale=auto | resize width=64 height=64 fit=inside | save", want{65, 49, "1/8"}, true},
		{"decode scale=auto | resize width=256 height=256 fit=inside | save", want{259, 195, "1/2"}, true},
		// 200 wide: the derived height is 150 from the full size, 151 from 1/2's 259x195.
		{"decode scale=auto | resize width=200 height=200 fit=inside | save", full, true},
		{"decode scale=1 | resize width=64 height=64 fit=inside | save", full, false},
		{"decode | resize width=64 height=64 fit=inside | save", want{65, 49, "1/8"}, true}, // auto is the default
		{"decode backend=go scale=auto | resize width=64 height=64 fit=inside | save", full, false},
	} {
		cpuOut := map[string][]byte{}
		for _, device := range []string{"cpu", "fake GPU", "fake GPU with turbo-cuda"} {
			t.Run(device+" "+tc.spec, func(t *testing.T) {
				if tc.needsLib && !turbo {
					t.Skip("libjpeg-turbo not usable here: every JPEG decodes at full size")
				}
				plan := compileWith(t, pipeline.Builtin, tc.spec)
				outShape := plan.OutShape(stages.Shape{W: 517, H: 389, C: 3})
				sink := pipeline.Collect()
				opt := pipeline.Options{Workers: 2}
				var dev *schedtest.FakeDevice
				var o *Options
				if device != "cpu" {
					dev = fakeGPU(t, schedtest.FakeConfig{Name: "fake0"})
					o = &Options{Device: dev, Streams: 2, Batch: 2}
					opt.Backend = o
				}
				withTurbo := strings.HasSuffix(device, "turbo-cuda")
				if withTurbo {
					o.Device = schedtest.Turbo{FakeDevice: dev}
				}
				sum, err := pipeline.Run(context.Background(), plan, pipeline.Inputs(inputs...), sink, opt)
				if err != nil {
					t.Fatal(err)
				}
				// nvJPEG is warmed up only when backend=auto may send it every JPEG: with a
				// scale (the default before a resize) or turbo-cuda, it is opened at the
				// first JPEG that needs it.
				if wantWarm := !withTurbo && !strings.Contains(tc.spec, "backend=") && plan.Decode.Scale == nil; dev != nil && (dev.Calls()["WarmDecoder"] > 0) != wantWarm {
					t.Errorf("%d decoder warm-ups, want them: %v", dev.Calls()["WarmDecoder"], wantWarm)
				}
				if wantDev := map[bool]string{true: "cpu", false: "fake0"}[device == "cpu"]; sum.Device != wantDev {
					t.Fatalf("ran on %q, want %q", sum.Device, wantDev)
				}
				if len(sink.Results) != 2 {
					t.Fatalf("%d results", len(sink.Results))
				}
				for _, r := range sink.Results {
					w := tc.jpeg
					if r.Input == "b.png" {
						w = full
					}
					// On a GPU run backend=auto sends the JPEG to turbo-cuda, at its scale, or
					// else to nvJPEG when it gets no scale, else to the CPU workers.
					if device != "cpu" && r.Input == "a.jpg" && !strings.Contains(tc.spec, "backend=") {
						wantDec := string(stages.JPEGTurbo)
						switch {
						case withTurbo:
							wantDec = sched.RouteTurbo
						case w.scale == "":
							wantDec = sched.RouteHW
						}
						if r.Decoder != wantDec {
							t.Errorf("a.jpg decoded by %q, want %q", r.Decoder, wantDec)
						}
					}
					if r.Status != pipeline.StatusOK || r.Width != w.w || r.Height != w.h || r.DecodeScale != w.scale {
						t.Errorf("%s: %s %dx%d scale %q (%v), want %dx%d scale %q", r.Input, r.Status, r.Width, r.Height, r.DecodeScale, r.Err, w.w, w.h, w.scale)
					}
					line, err := json.Marshal(r.Line())
					if err != nil {
						t.Fatal(err)
					}
					field := fmt.Sprintf(`"decode_scale":%q`, w.scale)
					if has := strings.Contains(string(line), `"decode_scale"`); has != (w.scale != "") || (has && !strings.Contains(string(line), field)) {
						t.Errorf("%s: report line %s, want %s only when scaled", r.Input, line, field)
					}
					m, err := stages.Decode(r.Encoded, stages.DecodeOptions{}, nil)
					if err != nil {
						t.Fatal(err)
					}
					if m.W != outShape.W || m.H != outShape.H {
						t.Errorf("%s: output %dx%d, want %dx%d as from the full size", r.Input, m.W, m.H, outShape.W, outShape.H)
					}
					if device == "cpu" {
						cpuOut[r.Input] = r.Encoded
					} else if !bytes.Equal(r.Encoded, cpuOut[r.Input]) {
						t.Errorf("%s decoded by %q: output differs from the CPU run's", r.Input, r.Decoder)
					}
				}
			})
		}
	}
}

// cpuAndTurbo runs spec over inputs on the CPU, then on a fake GPU with turbo-cuda
// (schedtest.Turbo), and returns the results of each.
func cpuAndTurbo(t *testing.T, spec string, inputs []pipeline.Input) (cpu, gpu *pipeline.Collector) {
	t.Helper()
	plan := compileWith(t, pipeline.Builtin, spec)
	cpu, gpu = pipeline.Collect(), pipeline.Collect()
	if _, err := pipeline.Run(context.Background(), plan, pipeline.Inputs(inputs...), cpu, pipeline.Options{Workers: 2}); err != nil {
		t.Fatal(err)
	}
	dev := schedtest.Turbo{FakeDevice: fakeGPU(t, schedtest.FakeConfig{Name: "fake0"})}
	if _, err := pipeline.Run(context.Background(), plan, pipeline.Inputs(inputs...), gpu, pipeline.Options{Workers: 2, Backend: &Options{Device: dev, Streams: 2, Batch: 2}}); err != nil {
		t.Fatal(err)
	}
	return cpu, gpu
}

// TestDecodeScaleTinyOnDevice: on sides of a few pixels libjpeg-turbo applies a larger scale
// that gives the same size (jpegturbo.AppliedDenom); a GPU run decodes such a JPEG with
// turbo-cuda at that scale when it has it, and on the CPU workers when it has not, so that the
// outputs are the CPU run's either way.
func TestDecodeScaleTinyOnDevice(t *testing.T) {
	if jpegturbo.Available() != nil {
		t.Skip("libjpeg-turbo not usable here: every JPEG decodes at full size")
	}
	rng := rand.New(rand.NewSource(9))
	var inputs []pipeline.Input
	for _, sz := range [][2]int{{2, 3}, {5, 5}, {3, 3}, {2, 2}, {40, 24}} {
		inputs = append(inputs, pipeline.Input{Name: fmt.Sprintf("%dx%d.jpg", sz[0], sz[1]), Data: stagestest.Encode(t, stagestest.ReadImage(rng, sz[0], sz[1], 3), "jpeg")})
	}
	cpuWorkers := string(stages.JPEGTurbo)
	for _, tc := range []struct {
		spec    string
		decoder map[string]string // by input; the others go to turbo-cuda
	}{
		// 2x3 and 3x3 decode at 1/4, 2x2 at 1/2: scales turbo-cuda has.
		{"decode scale=1/8 | flip axis=h | save format=png", nil},
		// 5x5 decodes at 3/8, and 3x3 at 5/8 (below): the CPU workers decode them.
		{"decode scale=1/4 | flip axis=h | save format=png", map[string]string{"5x5.jpg": cpuWorkers}},
		{"decode scale=1/2 | flip axis=h | save format=png", map[string]string{"3x3.jpg": cpuWorkers}},
	} {
		t.Run(tc.spec, func(t *testing.T) {
			cpu, gpu := cpuAndTurbo(t, tc.spec, inputs)
			want := map[string][]byte{}
			for _, r := range cpu.Results {
				want[r.Input] = r.Encoded
			}
			for _, r := range gpu.Results {
				dec := cmp.Or(tc.decoder[r.Input], sched.RouteTurbo)
				if r.Status != pipeline.StatusOK || r.Decoder != dec || !bytes.Equal(r.Encoded, want[r.Input]) {
					t.Errorf("%s: %s by %q (%v), want ok by %q with the CPU run's bytes (same: %v)", r.Input, r.Status, r.Decoder, r.Err, dec, bytes.Equal(r.Encoded, want[r.Input]))
				}
			}
		})
	}
}

// TestProgressiveOnDevice: a GPU run sends a progressive JPEG decoded at 1/8 to turbo-cuda,
// rewritten as a sequential one (package progressive), and decodes it on the CPU workers at
// larger scales, or when it cannot be rewritten; the outputs are the CPU run's either way.
func TestProgressiveOnDevice(t *testing.T) {
	if jpegturbo.Available() != nil {
		t.Skip("libjpeg-turbo not usable here")
	}
	var inputs []pipeline.Input
	for _, name := range []string{"p420", "p444", "gray", "restart", "spectral", "tiny"} {
		data, err := os.ReadFile(filepath.Join("..", "..", "stages", "testdata", "progressive", name+".jpg"))
		if err != nil {
			t.Fatal(err)
		}
		inputs = append(inputs, pipeline.Input{Name: name + ".jpg", Data: data})
	}
	// The file ends inside the third scan (a chroma AC scan, which the decode reads at any
	// scale): libjpeg-turbo warns of a premature end and the rewrite does not take it, so
	// the file fails on the CPU workers.
	cut := inputs[0].Data
	sos := 0
	for range 3 {
		sos += 2 + bytes.Index(cut[sos+2:], []byte{0xff, 0xda})
	}
	inputs = append(inputs, pipeline.Input{Name: "cut.jpg", Data: append(bytes.Clone(cut[:sos+30]), 0xff, 0xd9)})
	cpuWorkers := string(stages.JPEGTurbo)
	for _, tc := range []struct {
		spec    string
		decoder map[string]string // by input; the others go to turbo-cuda
	}{
		// tiny.jpg (2x3) decodes at 1/4 (jpegturbo.AppliedDenom).
		{"decode scale=1/8 | flip axis=h | save format=png", map[string]string{"tiny.jpg": cpuWorkers}},
		{"decode scale=1/4 | flip axis=h | save format=png", nil},
		{"decode | flip axis=h | save format=png", nil},
	} {
		t.Run(tc.spec, func(t *testing.T) {
			cpu, gpu := cpuAndTurbo(t, tc.spec, inputs)
			want := map[string]pipeline.Result{}
			for _, r := range cpu.Results {
				want[r.Input] = r
			}
			for _, r := range gpu.Results {
				dec := cpuWorkers
				if strings.Contains(tc.spec, "1/8") {
					dec = cmp.Or(tc.decoder[r.Input], sched.RouteTurbo)
				}
				w := want[r.Input]
				if r.Input == "cut.jpg" {
					dec = "" // failed
					if w.Status != pipeline.StatusFailed {
						t.Errorf("cut.jpg: %s on the CPU, want failed", w.Status)
					}
				}
				if r.Status != w.Status || r.Decoder != dec || !bytes.Equal(r.Encoded, w.Encoded) {
					t.Errorf("%s: %s by %q (%v), want %s by %q with the CPU run's bytes (same: %v)", r.Input, r.Status, r.Decoder, r.Err, w.Status, dec, bytes.Equal(r.Encoded, w.Encoded))
				}
			}
		})
	}
}
