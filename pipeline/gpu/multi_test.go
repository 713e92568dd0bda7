package gpu

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/imgpipe/imgpipe/pipeline"
	"github.com/imgpipe/imgpipe/stages/stagestest"

	"github.com/imgpipe/imgpipe/cudastage/sched"
	"github.com/imgpipe/imgpipe/cudastage/sched/schedtest"
)

// fakeGPUs are n fake devices named fake0, fake1, ..., each set up by cfg(i).
func fakeGPUs(t *testing.T, n int, cfg func(i int) schedtest.FakeConfig) ([]sched.Device, []*schedtest.FakeDevice) {
	t.Helper()
	var devs []sched.Device
	var fakes []*schedtest.FakeDevice
	for i := range n {
		c := cfg(i)
		c.Name = fmt.Sprintf("fake%d", i)
		d := fakeGPU(t, c)
		devs, fakes = append(devs, d), append(fakes, d)
	}
	return devs, fakes
}

// checkNothingLive fails when a fake device still holds an object.
func checkNothingLive(t *testing.T, fakes []*schedtest.FakeDevice) {
	t.Helper()
	for i, d := range fakes {
		if l := d.Live(); l != (schedtest.FakeLive{}) {
			t.Errorf("device %d: objects left: %+v", i, l)
		}
	}
}

// A run over several devices gives the CPU run's results, in input order, each input
// once; every device takes a share; the summary's totals are the devices' sums.
func TestMultiGPURunMatchesCPU(t *testing.T) {
	for _, n := range []int{2, 3} {
		t.Run(fmt.Sprint(n, " devices"), func(t *testing.T) {
			base := runtime.NumGoroutine()
			plan, err := pipeline.Compile(mustSteps(t, "decode | grayscale | blur sigma=1.5 | transpose | histogram | save format=png"))
			if err != nil {
				t.Fatal(err)
			}
			devs, fakes := fakeGPUs(t, n, func(int) schedtest.FakeConfig {
				return schedtest.FakeConfig{H2DRate: 2e9, D2HRate: 2e9, KernelLatency: 100 * time.Microsecond}
			})
			inputs := mixedInputs(t, rand.New(rand.NewSource(int64(n))), 80)
			gpu := &Options{Devices: devs, Streams: 2, Batch: 4, SlotBytes: 16 << 10, Linger: time.Millisecond}
			cpu, got, cpuRep, devRep, sum := runBoth(t, plan, inputs, gpu, 3)
			if len(got.Results) != len(inputs) {
				t.Fatalf("%d results, %d inputs", len(got.Results), len(inputs))
			}
			for i, r := range got.Results {
				c := cpu.Results[i]
				if r.Index != i || r.Input != inputs[i].Name {
					t.Fatalf("result %d is input %d (%s)", i, r.Index, r.Input)
				}
				if r.Status != c.Status || r.Output != c.Output || !bytes.Equal(r.Encoded, c.Encoded) ||
					(r.Histogram == nil) != (c.Histogram == nil) || (r.Histogram != nil && *r.Histogram != *c.Histogram) {
					t.Errorf("%s: GPU %s %q, CPU %s %q, or their bytes differ", r.Input, r.Status, r.Output, c.Status, c.Output)
				}
			}
			if len(reportLines(t, devRep)) != len(reportLines(t, cpuRep)) {
				t.Errorf("report lines: GPU %d, CPU %d", len(reportLines(t, devRep)), len(reportLines(t, cpuRep)))
			}
			var batches, images int64
			for i, g := range sum.GPUs {
				if g.Device != fmt.Sprintf("fake%d", i) || g.Batches < 1 || g.Images < 1 || g.Overlap <= 0 {
					t.Errorf("GPU %d: %+v", i, g)
				}
				batches += g.Batches
				images += g.Images
			}
			onDevice := int64(sum.OK - sum.CPUFallback)
			if len(sum.GPUs) != n || batches != sum.Batches || images != onDevice || sum.Overlap <= 0 ||
				sum.Device != strings.Join([]string{"fake0", "fake1", "fake2"}[:n], ", ") {
				t.Errorf("summary %+v (%d batches, %d images on the devices, want %d)", sum, batches, images, onDevice)
			}
			if last := reportLines(t, devRep); !strings.Contains(last[len(last)-1], `"gpus":[{"device":"fake0","batches":`) {
				t.Errorf("summary line lacks the per-GPU figures: %s", last[len(last)-1])
			}
			checkNoLeaks(t, base)
			checkNothingLive(t, fakes)
		})
	}
}

// A slow device takes fewer batches than a fast one: inputs go where there is room. (The
// outputs are staged files, which leave the window as they come: a sink that keeps images
// holds the window until reported in order, and then the slow device sets the pace.)
func TestMultiGPUSlowDeviceTakesLess(t *testing.T) {
	plan, err := pipeline.Compile(mustSteps(t, "decode | grayscale | transpose | save"))
	if err != nil {
		t.Fatal(err)
	}
	devs, fakes := fakeGPUs(t, 2, func(i int) schedtest.FakeConfig {
		if i == 1 {
			return schedtest.FakeConfig{KernelLatency: 20 * time.Millisecond}
		}
		return schedtest.FakeConfig{}
	})
	rng := rand.New(rand.NewSource(3))
	var inputs []pipeline.Input
	for i := range 300 {
		inputs = append(inputs, pipeline.Input{Name: fmt.Sprintf("%03d.rgb", i), Image: stagestest.ReadImage(rng, 8, 8, 3)})
	}
	var report bytes.Buffer
	sum, err := pipeline.Run(context.Background(), plan, pipeline.Inputs(inputs...), pipeline.ToFolder(t.TempDir()), pipeline.Options{Workers: 4, Report: &report,
		Backend: &Options{Devices: devs, Streams: 1, Batch: 4, SlotBytes: 4 << 10, Linger: time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	if sum.OK != len(inputs) || len(sum.GPUs) != 2 {
		t.Fatalf("summary %+v", sum)
	}
	if fast, slow := sum.GPUs[0], sum.GPUs[1]; slow.Batches < 1 || 2*slow.Batches >= fast.Batches {
		t.Errorf("the slow device ran %d batches, the fast one %d: want under half", slow.Batches, fast.Batches)
	}
	lines := reportLines(t, report.String())
	for i, l := range lines[:len(lines)-1] {
		var rl pipeline.ReportLine
		if err := json.Unmarshal([]byte(l), &rl); err != nil {
			t.Fatal(err)
		}
		if rl.Input != inputs[i].Name || rl.Status != pipeline.StatusOK {
			t.Fatalf("report line %d: %s", i, l)
		}
	}
	checkNothingLive(t, fakes)
}

// A fault on one device ends the run with its error; the outputs written are whole and
// reported, and both devices give everything back. Cancelling does the same with the
// context's error.
func TestMultiGPUFaultAndCancel(t *testing.T) {
	for _, tt := range []struct {
		name   string
		fault  bool
		cancel bool
		want   string
	}{
		{name: "fault on the second device", fault: true, want: "device error: fake1: batch"},
		{name: "cancel", cancel: true, want: context.Canceled.Error()},
	} {
		t.Run(tt.name, func(t *testing.T) {
			base := runtime.NumGoroutine()
			plan, err := pipeline.Compile(mustSteps(t, "decode | grayscale | blur sigma=1 | save"))
			if err != nil {
				t.Fatal(err)
			}
			var blurs atomic.Int32
			devs, fakes := fakeGPUs(t, 2, func(i int) schedtest.FakeConfig {
				c := schedtest.FakeConfig{KernelLatency: 200 * time.Microsecond}
				if i == 1 && tt.fault {
					c.Fault = func(call string) error {
						if call == "Run blur" && blurs.Add(1) == 4 {
							return errors.New("illegal address (injected)")
						}
						return nil
					}
				}
				return c
			})
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			out := t.TempDir()
			var report bytes.Buffer
			n := 0
			sum, err := pipeline.Run(ctx, plan, pipeline.Inputs(slowInputs(t, 300)...), pipeline.ToFolder(out), pipeline.Options{Workers: 3, Report: &report,
				Progress: func(*pipeline.Result) {
					if n++; n == 10 && tt.cancel {
						cancel()
					}
				},
				Backend: &Options{Devices: devs, Streams: 2, Batch: 4, SlotBytes: 64 << 10}})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err %v, want %q", err, tt.want)
			}
			if sum.Interrupted != tt.cancel || sum.OK >= 300 || sum.Failed != 0 {
				t.Errorf("summary %+v", sum)
			}
			checkOutputsMatchReport(t, out, report.String(), sum.OK)
			checkNoLeaks(t, base)
			checkNothingLive(t, fakes)
		})
	}
}

// Settings that cannot work over several devices are refused before any is touched.
func TestMultiGPUOptionsErrors(t *testing.T) {
	plan, err := pipeline.Compile(mustSteps(t, "decode | grayscale"))
	if err != nil {
		t.Fatal(err)
	}
	devs, _ := fakeGPUs(t, 2, func(int) schedtest.FakeConfig { return schedtest.FakeConfig{} })
	noDecoder := fakeGPU(t, schedtest.FakeConfig{Name: "nodecoder", DecoderUnavailable: errors.New("no nvJPEG")})
	tests := []struct {
		name string
		gpu  Options
		want string
	}{
		{"both", Options{Device: devs[0], Devices: devs}, "both Device and Devices"},
		{"nil device", Options{Devices: []sched.Device{devs[0], nil}}, "nil device among Devices"},
		{"bad setting", Options{Devices: devs, Streams: 65}, "streams 65 (max 64)"},
		{"unequal devices", Options{Devices: []sched.Device{devs[0], noDecoder}}, "fake0 and nodecoder differ in decoding files"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Check(plan, pipeline.Options{Backend: &tt.gpu})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Check: got %v, want %q", err, tt.want)
			}
		})
	}
}

// The trace has one group of stream tracks per device, named after it.
func TestMultiGPUTrace(t *testing.T) {
	plan, err := pipeline.Compile(mustSteps(t, "decode | grayscale | save"))
	if err != nil {
		t.Fatal(err)
	}
	devs, _ := fakeGPUs(t, 2, func(int) schedtest.FakeConfig { return schedtest.FakeConfig{KernelLatency: 100 * time.Microsecond} })
	tr := sched.NewTrace("imgpipe", 0)
	if _, err := pipeline.Run(context.Background(), plan, pipeline.Inputs(slowInputs(t, 40)...), pipeline.Collect(),
		pipeline.Options{Workers: 2, Trace: tr, Backend: &Options{Devices: devs, Streams: 2, Batch: 2, SlotBytes: 64 << 10}}); err != nil {
		t.Fatal(err)
	}
	found := map[string]bool{}
	for _, e := range schedtest.TraceEvents(t, tr) {
		if e.Ph == "M" && e.Name == "thread_name" {
			found[e.Args["name"].(string)] = true
		}
	}
	for _, track := range []string{"fake0 stream 0", "fake0 stream 1", "fake1 stream 0", "fake1 stream 1"} {
		if !found[track] {
			t.Errorf("no track %q; tracks: %v", track, found)
		}
	}
}

// When a device cannot start, the run fails naming it, before any input, and the
// executors that did start are closed.
func TestMultiGPUStartFails(t *testing.T) {
	base := runtime.NumGoroutine()
	plan, err := pipeline.Compile(mustSteps(t, "decode | grayscale | save"))
	if err != nil {
		t.Fatal(err)
	}
	devs, fakes := fakeGPUs(t, 3, func(i int) schedtest.FakeConfig {
		c := schedtest.FakeConfig{}
		if i == 1 {
			c.Fault = func(call string) error {
				if call == "NewStream" {
					return errors.New("out of memory (injected)")
				}
				return nil
			}
		}
		return c
	})
	sum, err := pipeline.Run(context.Background(), plan, pipeline.Inputs(slowInputs(t, 10)...), pipeline.ToFolder(t.TempDir()), pipeline.Options{Workers: 2,
		Backend: &Options{Devices: devs, Streams: 2, Batch: 4, SlotBytes: 64 << 10}})
	if err == nil || !strings.Contains(err.Error(), "device fake1: ") || !strings.Contains(err.Error(), "out of memory (injected)") || sum.OK != 0 {
		t.Fatalf("Run = %+v, %v; want fake1's failure to start", sum, err)
	}
	checkNoLeaks(t, base)
	checkNothingLive(t, fakes)
}
