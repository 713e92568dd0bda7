package gpu

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand"
	"strings"
	"sync"
	"testing"

	"github.com/imgpipe/imgpipe/pipeline"
	"github.com/imgpipe/imgpipe/stages/stagestest"

	"github.com/imgpipe/imgpipe/cudastage/sched"
	"github.com/imgpipe/imgpipe/cudastage/sched/schedtest"
	"github.com/imgpipe/imgpipe/stages"
)

// noJPEGStart is a fake device whose JPEG encoder loads but cannot be made (as when
// nvJPEG's encoder state creation fails).
type noJPEGStart struct{ *schedtest.FakeDevice }

func (noJPEGStart) NewJPEGEncoder() (sched.ImageEncoder, error) {
	return nil, errors.New("nvjpegEncoderStateCreate: out of memory")
}

// TestGPURunJPEGEncoder checks the wiring of save format=jpeg on a GPU run with the fake
// device's encoder hook: the device encodes (report "nvjpeg", the save's quality, the hook's
// bytes) when it has an encoder and the CPU's is not libjpeg-turbo; the CPU encoder
// ("jpeg-turbo" or "jpeg") when the CPU's is libjpeg-turbo, when the device has none, when
// the save is not JPEG, for an image too large for a slot or smaller than
// deviceJPEGMinPixels (then no device encoder is made at all), and when the encoder cannot
// be made (one notice); an encoding error fails only its input; every encoder made is
// closed.
func TestGPURunJPEGEncoder(t *testing.T) {
	rng := rand.New(rand.NewSource(5))
	inputs := []pipeline.Input{
		{Name: "a.rgb", Image: stagestest.ReadImage(rng, 10, 7, 3)},
		{Name: "b.rgb", Image: stagestest.ReadImage(rng, 3, 9, 3)},
		{Name: "big.rgb", Image: stagestest.ReadImage(rng, 200, 200, 3)},
		{Name: "c.gray", Image: stagestest.ReadImage(rng, 5, 5, 1)},
	}
	fakeFile := func(m *stages.Image, q int) []byte { return fmt.Appendf(nil, "fake %dx%dx%d q%d", m.W, m.H, m.C, q) }
	var mu sync.Mutex
	var qualities []int
	hook := func(m *stages.Image, q int) ([]byte, error) {
		mu.Lock()
		qualities = append(qualities, q)
		mu.Unlock()
		if m.W == 9 { // b.rgb, transposed
			return nil, errors.New("nvjpegEncodeImage: bad input")
		}
		return fakeFile(m, q), nil
	}
	for _, c := range []struct {
		name      string
		spec      string
		hook      func(*stages.Image, int) ([]byte, error)
		wrap      bool
		minPixels int               // deviceJPEGMinPixels; 0 keeps the default, which all these images are under
		want      map[string]string // input → encoder ("" for a failed input)
		notice    string
		devEncs   int  // encodes on the device
		fast      bool // cpuJPEGFast: libjpeg-turbo is the CPU's encoder
	}{
		{"nvjpeg", "decode backend=go | transpose | save format=jpeg quality=80", hook, false, 1,
			map[string]string{"a.rgb": "nvjpeg", "b.rgb": "", "big.rgb": "jpeg", "c.gray": "nvjpeg"}, "", 3, false},
		{"small on the CPU", "decode backend=go | transpose | save format=jpeg quality=80", hook, false, 0,
			map[string]string{"a.rgb": "jpeg", "b.rgb": "jpeg", "big.rgb": "jpeg", "c.gray": "jpeg"}, "", 0, false},
		{"at the limit", "decode backend=go | transpose | save format=jpeg quality=80", hook, false, 7 * 10,
			map[string]string{"a.rgb": "nvjpeg", "b.rgb": "jpeg", "big.rgb": "jpeg", "c.gray": "jpeg"}, "", 1, false},
		{"no device encoder", "decode backend=go | transpose | save format=jpeg quality=80", nil, false, 1,
			map[string]string{"a.rgb": "jpeg", "b.rgb": "jpeg", "big.rgb": "jpeg", "c.gray": "jpeg"}, "", 0, false},
		{"png", "decode backend=go | transpose | save format=png", hook, false, 1,
			map[string]string{"a.rgb": "png-fast", "b.rgb": "png-fast", "big.rgb": "png-fast", "c.gray": "png-fast"}, "", 0, false},
		{"encoder cannot start", "decode backend=go | transpose | save format=jpeg quality=80", hook, true, 1,
			map[string]string{"a.rgb": "jpeg", "b.rgb": "jpeg", "big.rgb": "jpeg", "c.gray": "jpeg"}, "JPEG outputs are encoded on the CPU: nvjpegEncoderStateCreate: out of memory", 0, false},
		{"libjpeg-turbo on the CPU", "decode backend=go | transpose | save format=jpeg quality=80", hook, false, 1,
			map[string]string{"a.rgb": "jpeg", "b.rgb": "jpeg", "big.rgb": "jpeg", "c.gray": "jpeg"}, "", 0, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			qualities = nil
			defer func(f func() bool) { cpuJPEGFast = f }(cpuJPEGFast)
			cpuJPEGFast = func() bool { return c.fast }
			if c.minPixels > 0 {
				defer func(v int) { deviceJPEGMinPixels = v }(deviceJPEGMinPixels)
				deviceJPEGMinPixels = c.minPixels
			}
			fake := fakeGPU(t, schedtest.FakeConfig{JPEGEncode: c.hook})
			var dev sched.Device = fake
			if c.wrap {
				dev = noJPEGStart{fake}
			}
			var notices []string
			var nmu sync.Mutex
			sink := pipeline.Collect()
			sum, err := pipeline.Run(context.Background(), compileWith(t, pipeline.Builtin, c.spec), pipeline.Inputs(inputs...), sink, pipeline.Options{
				Workers: 2,
				Notice:  func(m string) { nmu.Lock(); notices = append(notices, m); nmu.Unlock() },
				Backend: &Options{Device: dev, Batch: 2, SlotBytes: 64 << 10}})
			if err != nil {
				t.Fatal(err)
			}
			if sum.Device == "cpu" || sum.CPUFallback != 1 {
				t.Errorf("summary: device %q, CPU fallbacks %d; want the fake, 1 (big.rgb)", sum.Device, sum.CPUFallback)
			}
			for _, res := range sink.Results {
				want := c.want[res.Input]
				if want == "jpeg" { // the CPU's encoder, whichever loads here
					want = stages.JPEGEncoder()
				}
				if want == "" {
					var se *pipeline.StageError
					if res.Status != pipeline.StatusFailed || !errors.As(res.Err, &se) || se.Stage != "save" || !strings.Contains(res.Err.Error(), "bad input") {
						t.Errorf("%s: status %s, error %v; want a save failure", res.Input, res.Status, res.Err)
					}
					continue
				}
				if res.Status != pipeline.StatusOK || res.Encoder != want {
					t.Errorf("%s: status %s (%v), encoder %q; want ok, %q", res.Input, res.Status, res.Err, res.Encoder, want)
					continue
				}
				switch want {
				case "nvjpeg":
					if !bytes.Equal(res.Encoded, fakeFile(res.Image, 80)) {
						t.Errorf("%s: output %q is not the device encoder's", res.Input, res.Encoded)
					}
				case "jpeg":
					if _, err := stages.DecodeHeader(res.Encoded, stages.DecodeOptions{}); err != nil || !bytes.HasPrefix(res.Encoded, []byte{0xFF, 0xD8}) {
						t.Errorf("%s: the CPU encoder's output is no JPEG: %v", res.Input, err)
					}
				}
			}
			for _, q := range qualities {
				if q != 80 {
					t.Errorf("device encoder got quality %d, want 80", q)
				}
			}
			calls := fake.Calls()
			if calls["JPEG encode"] != c.devEncs || calls["JPEG encoder new"] != calls["JPEG encoder close"] || calls["JPEG encoder new"] > 2 {
				t.Errorf("device JPEG calls %v: want %d encodes, at most one encoder per save worker, each closed", calls, c.devEncs)
			}
			if c.devEncs == 0 && !c.wrap && calls["JPEG encoder new"] != 0 {
				t.Errorf("device JPEG calls %v: an encoder was made for no device encode", calls)
			}
			got := strings.Join(notices, "\n")
			if c.notice == "" && strings.Contains(got, "JPEG outputs") || c.notice != "" && strings.Count(got, c.notice) != 1 {
				t.Errorf("notices %q, want %q once", notices, c.notice)
			}
		})
	}
}
