package pipeline

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/imgpipe/imgpipe/cudastage/sched/schedtest"
	"github.com/imgpipe/imgpipe/stages"
)

func TestDeviceDecoderRule(t *testing.T) {
	tests := []struct {
		backend, turbo, route string
		scaled                bool
		want                  string
		asks                  bool // whether the rule asks nvJPEG's route
	}{
		{"auto", "", "nvjpeg-hw", false, "nvjpeg-hw", true},
		{"auto", "turbo-cuda", "nvjpeg-hw", false, "turbo-cuda", false}, // libjpeg-turbo's bytes, on the device
		{"auto", "turbo-cuda", "nvjpeg-hw", true, "turbo-cuda", false},  // a thumbnail: libjpeg-turbo's scaled pixels, on the device
		{"auto", "", "nvjpeg-hw", true, "", false},                      // the engines do not scale as libjpeg-turbo: CPU workers
		{"auto", "", "nvjpeg-cuda", false, "", true},                    // progressive: libjpeg-turbo on CPU workers
		{"auto", "", "", false, "", true},
		{"nvjpeg", "turbo-cuda", "nvjpeg-hw", false, "nvjpeg-hw", true},
		{"nvjpeg", "", "nvjpeg-hw", true, "nvjpeg-hw", true},
		{"nvjpeg", "", "nvjpeg-cuda", false, "nvjpeg-cuda", true},
		{"nvjpeg", "", "", false, "", true},
		{"go", "turbo-cuda", "nvjpeg-hw", false, "", false},
		{"turbo", "turbo-cuda", "nvjpeg-hw", true, "", false},
	}
	for _, tt := range tests {
		asked := false
		got := deviceDecoder(tt.backend, tt.scaled, func() string { return tt.turbo }, func() string { asked = true; return tt.route })
		if got != tt.want || asked != tt.asks {
			t.Errorf("deviceDecoder(%q, scaled %v, turbo %q, route %q) = %q (asked %v), want %q (asked %v)",
				tt.backend, tt.scaled, tt.turbo, tt.route, got, asked, tt.want, tt.asks)
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
		plan, err := Compile(mustSteps(t, "decode backend="+tt.backend+" | grayscale"))
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

// TestPNGFastBound checks the device encoding op of save compression=fast: its bytes are
// the CPU encoder's, and its Bound holds for incompressible images of edge sizes.
func TestPNGFastBound(t *testing.T) {
	op := pngFastOp()
	rng := rand.New(rand.NewPCG(3, 4))
	for _, sz := range [][3]int{{1, 1, 1}, {1, 1, 3}, {1, 300, 3}, {300, 1, 1}, {257, 129, 3}, {600, 400, 1}} {
		m := stages.NewImage(sz[0], sz[1], sz[2])
		for i := range m.Pix {
			m.Pix[i] = byte(rng.Uint32())
		}
		dst := make([]byte, op.Encode.Bound(m.Shape()))
		n := op.Encode.CPU(dst, m)
		var want bytes.Buffer
		if err := stages.Encode(&want, m, stages.SaveOptions{Format: "png", Compression: stages.PNGFast}); err != nil {
			t.Fatal(err)
		}
		if n < 0 || !bytes.Equal(dst[:n], want.Bytes()) {
			t.Errorf("%v: %d bytes in a bound of %d, want the CPU's %d", m.Shape(), n, len(dst), want.Len())
		}
	}
}
