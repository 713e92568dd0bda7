package gpu

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/imgpipe/imgpipe/cudastage/sched"
	"github.com/imgpipe/imgpipe/pipeline"
	"github.com/imgpipe/imgpipe/stages/stagestest"

	"github.com/imgpipe/imgpipe/cudastage/sched/schedtest"
)

func TestDeviceDecoderRule(t *testing.T) {
	tests := []struct {
		backend, turbo, route string
		scaled, progressive   bool
		want                  string
		asks                  bool // whether the rule asks nvJPEG's route
	}{
		{"auto", "", "nvjpeg-hw", false, false, "nvjpeg-hw", true},
		{"auto", "turbo-cuda", "nvjpeg-hw", false, false, "turbo-cuda", false}, // libjpeg-turbo's bytes, on the device
		{"auto", "turbo-cuda", "nvjpeg-hw", true, false, "turbo-cuda", false},  // a thumbnail: libjpeg-turbo's scaled pixels, on the device
		{"auto", "", "nvjpeg-hw", true, false, "", false},                      // the engines do not scale as libjpeg-turbo: CPU workers
		{"auto", "", "nvjpeg-cuda", false, true, "", false},                    // progressive: libjpeg-turbo on CPU workers, nvJPEG not opened
		{"auto", "", "nvjpeg-cuda", true, true, "", false},
		{"auto", "", "nvjpeg-cuda", false, false, "", true}, // a baseline file only the CUDA decoder takes: CPU workers
		{"auto", "", "", false, false, "", true},
		{"nvjpeg", "turbo-cuda", "nvjpeg-hw", false, false, "nvjpeg-hw", true},
		{"nvjpeg", "", "nvjpeg-hw", true, false, "nvjpeg-hw", true},
		{"nvjpeg", "", "nvjpeg-cuda", false, true, "nvjpeg-cuda", true},
		{"nvjpeg", "", "", false, false, "", true},
		{"go", "turbo-cuda", "nvjpeg-hw", false, false, "", false},
		{"turbo", "turbo-cuda", "nvjpeg-hw", true, false, "", false},
	}
	for _, tt := range tests {
		asked := false
		got := deviceDecoder(pipeline.DecodeBackend(tt.backend), tt.scaled, tt.progressive, func() string { return tt.turbo }, func() string { asked = true; return tt.route })
		if got != tt.want || asked != tt.asks {
			t.Errorf("deviceDecoder(%q, scaled %v, progressive %v, turbo %q, route %q) = %q (asked %v), want %q (asked %v)",
				tt.backend, tt.scaled, tt.progressive, tt.turbo, tt.route, got, asked, tt.want, tt.asks)
		}
	}
}

func TestFileDecoderFor(t *testing.T) {
	ok := schedtest.NewFake(schedtest.FakeConfig{})
	defer ok.Close()
	missing := schedtest.NewFake(schedtest.FakeConfig{DecoderUnavailable: errors.New("no nvJPEG")})
	defer missing.Close()
	tests := []struct {
		backend string
		dev     *schedtest.FakeDevice
		found   bool
		err     bool
	}{
		{"nvjpeg", nil, false, true},
		{"nvjpeg", missing, false, true},
		{"nvjpeg", ok, true, false},
		{"auto", nil, false, false},
		{"auto", missing, false, false},
		{"auto", ok, true, false},
		{"go", ok, false, false},
	}
	for _, tt := range tests {
		plan, err := pipeline.Compile(mustSteps(t, "decode backend="+tt.backend+" | grayscale"))
		if err != nil {
			t.Fatal(err)
		}
		var fd any
		if tt.dev != nil {
			fd, err = fileDecoderFor(plan, tt.dev)
		} else {
			fd, err = fileDecoderFor(plan, nil)
		}
		if (err != nil) != tt.err || (err != nil && !errors.Is(err, ErrNoDeviceDecoder)) {
			t.Errorf("%s on %v: error %v", tt.backend, tt.dev != nil, err)
		}
		if found := fd != nil; found != tt.found && err == nil {
			t.Errorf("%s: decoder found %v, want %v", tt.backend, found, tt.found)
		}
	}
}

// TestProgressiveNotRouted: with backend=auto a GPU run decodes a progressive JPEG on the CPU
// workers without asking nvJPEG's route, which on a CUDA device opens nvJPEG, and gives the CPU
// run's bytes; a baseline JPEG that turbo-cuda does not take is still asked about.
func TestProgressiveNotRouted(t *testing.T) {
	prog, err := os.ReadFile(filepath.Join("..", "..", "stages", "testdata", "progressive.jpg"))
	if err != nil {
		t.Fatal(err)
	}
	inputs := []pipeline.Input{{Name: "p.jpg", Data: prog}, {Name: "b.jpg", Data: stagestest.Encode(t, stagestest.Smooth(64, 48, 1), "jpeg")}}
	plan := compileWith(t, pipeline.Builtin, "decode | flip axis=h | save format=png")
	cpu := pipeline.Collect()
	if _, err := pipeline.Run(context.Background(), plan, pipeline.Inputs(inputs...), cpu, pipeline.Options{Workers: 2}); err != nil {
		t.Fatal(err)
	}
	want, cpuDecoder := map[string][]byte{}, ""
	for _, r := range cpu.Results {
		want[r.Input] = r.Encoded
		if r.Input == "p.jpg" {
			cpuDecoder = r.Decoder
		}
	}
	for _, tc := range []struct {
		turbo    bool
		routes   int    // nvJPEG's route asked: for b.jpg only, without turbo-cuda
		baseline string // b.jpg's decoder
	}{
		{false, 1, sched.RouteHW},
		{true, 0, sched.RouteTurbo},
	} {
		dev := fakeGPU(t, schedtest.FakeConfig{Name: "fake0"})
		o := &Options{Device: dev, Streams: 2, Batch: 2}
		opt := pipeline.Options{Workers: 2, Backend: o}
		if tc.turbo {
			o.Device = schedtest.Turbo{FakeDevice: dev}
		}
		gpu := pipeline.Collect()
		if _, err := pipeline.Run(context.Background(), plan, pipeline.Inputs(inputs...), gpu, opt); err != nil {
			t.Fatal(err)
		}
		if n := dev.RouteCalls(); n != tc.routes {
			t.Errorf("turbo-cuda %v: nvJPEG's route asked %d times, want %d", tc.turbo, n, tc.routes)
		}
		for _, r := range gpu.Results {
			dec := map[string]string{"p.jpg": cpuDecoder, "b.jpg": tc.baseline}[r.Input]
			if r.Status != pipeline.StatusOK || r.Decoder != dec || !bytes.Equal(r.Encoded, want[r.Input]) {
				t.Errorf("turbo-cuda %v: %s %s by %q (%v), want ok by %q with the CPU run's bytes (same: %v)",
					tc.turbo, r.Input, r.Status, r.Decoder, r.Err, dec, bytes.Equal(r.Encoded, want[r.Input]))
			}
		}
	}
}
