package gpu

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/rand"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/imgpipe/imgpipe/pipeline"
	"github.com/imgpipe/imgpipe/stages/stagestest"

	"github.com/imgpipe/imgpipe/cudastage/sched"
	"github.com/imgpipe/imgpipe/cudastage/sched/schedtest"
	"github.com/imgpipe/imgpipe/stages"
)

// fakeGPU is a CPU stand-in for a GPU: streams are goroutines, ops run with package stages.
func fakeGPU(t testing.TB, cfg schedtest.FakeConfig) *schedtest.FakeDevice {
	t.Helper()
	d := schedtest.NewFake(cfg)
	t.Cleanup(d.Close)
	return d
}

// slowInputs are n 64×48 PNGs, enough work that a run can be stopped midway.
func slowInputs(t testing.TB, n int) []pipeline.Input {
	rng := rand.New(rand.NewSource(5))
	data := stagestest.Encode(t, stagestest.ReadImage(rng, 64, 48, 3), "png")
	in := make([]pipeline.Input, n)
	for i := range in {
		in[i] = pipeline.Input{Name: fmt.Sprintf("in/%03d.png", i), Data: data}
	}
	return in
}

// Cancelling a GPU run abandons the batches on the device, reports what was done, writes
// no partial output, and ends every goroutine and device allocation.
func TestGPURunCancel(t *testing.T) {
	base := runtime.NumGoroutine()
	plan, err := pipeline.Compile(mustSteps(t, "decode | blur sigma=2 | save"))
	if err != nil {
		t.Fatal(err)
	}
	dev := fakeGPU(t, schedtest.FakeConfig{H2DRate: 20e6, D2HRate: 20e6, KernelLatency: time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := t.TempDir()
	var report bytes.Buffer
	n := 0
	sum, err := pipeline.Run(ctx, plan, pipeline.Inputs(slowInputs(t, 300)...), pipeline.ToFolder(out), pipeline.Options{Workers: 3, Report: &report,
		Progress: func(*pipeline.Result) {
			if n++; n == 10 {
				cancel()
			}
		},
		Backend: &Options{Device: dev, Streams: 2, Batch: 4, SlotBytes: 64 << 10}})
	if !errors.Is(err, context.Canceled) || !sum.Interrupted || sum.OK < 10 || sum.OK >= 300 {
		t.Fatalf("err %v, summary %+v", err, sum)
	}
	checkOutputsMatchReport(t, out, report.String(), sum.OK)
	checkNoLeaks(t, base)
	if l := dev.Live(); l != (schedtest.FakeLive{}) {
		t.Errorf("device memory left: %+v", l)
	}
}

// checkOutputsMatchReport checks that the folder holds exactly the outputs the report
// lists as ok (so nothing unreported or partial), each a whole PNG.
func checkOutputsMatchReport(t *testing.T, out, report string, ok int) {
	t.Helper()
	lines := reportLines(t, report)
	listed := map[string]bool{}
	for _, l := range lines[:len(lines)-1] {
		var rl pipeline.ReportLine
		if err := json.Unmarshal([]byte(l), &rl); err != nil {
			t.Fatal(err)
		}
		if rl.Status == pipeline.StatusOK {
			listed[rl.Output] = true
		}
	}
	if len(listed) != ok {
		t.Errorf("%d ok lines, summary says %d", len(listed), ok)
	}
	found := 0
	filepath.WalkDir(out, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(out, path)
		found++
		if !listed[filepath.ToSlash(rel)] {
			t.Errorf("%s written but not reported ok", rel)
		}
		data, _ := os.ReadFile(path)
		if _, err := stages.Decode(data, stages.DecodeOptions{}, nil); err != nil {
			t.Errorf("%s is not a whole image: %v", rel, err)
		}
		return nil
	})
	if found != len(listed) {
		t.Errorf("%d files, %d reported", found, len(listed))
	}
}

// A device fault mid-run ends the run with the device's error, not as an interrupt; the
// outputs written before are whole and reported, and everything is released.
func TestGPURunDeviceFault(t *testing.T) {
	base := runtime.NumGoroutine()
	plan, err := pipeline.Compile(mustSteps(t, "decode | grayscale | blur sigma=1 | save"))
	if err != nil {
		t.Fatal(err)
	}
	var blurs atomic.Int32
	dev := fakeGPU(t, schedtest.FakeConfig{KernelLatency: 200 * time.Microsecond, Fault: func(call string) error {
		if call == "Run blur" && blurs.Add(1) == 6 {
			return errors.New("illegal address (injected)")
		}
		return nil
	}})
	out := t.TempDir()
	var report bytes.Buffer
	sum, err := pipeline.Run(context.Background(), plan, pipeline.Inputs(slowInputs(t, 200)...), pipeline.ToFolder(out), pipeline.Options{Workers: 3, Report: &report,
		Backend: &Options{Device: dev, Streams: 2, Batch: 4, SlotBytes: 64 << 10}})
	if err == nil || !strings.Contains(err.Error(), "device error: fake: batch") || !strings.Contains(err.Error(), "illegal address (injected)") {
		t.Fatalf("err %v", err)
	}
	if sum.Interrupted || sum.OK >= 200 || sum.Failed != 0 {
		t.Errorf("summary %+v", sum)
	}
	checkOutputsMatchReport(t, out, report.String(), sum.OK)
	checkNoLeaks(t, base)
}

// on_error: fail stops a GPU run at the first failure: every input before it is reported,
// and after it only inputs that were already in progress (Options.StopOnError), in order.
func TestGPURunStopOnError(t *testing.T) {
	plan, err := pipeline.Compile(mustSteps(t, "decode | grayscale | save"))
	if err != nil {
		t.Fatal(err)
	}
	in := slowInputs(t, 80)
	in[30].Data = in[30].Data[:50]
	dev := fakeGPU(t, schedtest.FakeConfig{})
	sink := pipeline.Collect()
	sum, err := pipeline.Run(context.Background(), plan, pipeline.Inputs(in...), sink, pipeline.Options{Workers: 2, StopOnError: true,
		Backend: &Options{Device: dev, Batch: 4, SlotBytes: 64 << 10}})
	if !errors.Is(err, pipeline.ErrStopped) || !sum.Stopped || sum.Failed != 1 {
		t.Fatalf("err %v, summary %+v", err, sum)
	}
	for i, r := range sink.Results {
		if i <= 30 && r.Index != i || i > 30 && r.Index <= sink.Results[i-1].Index || (r.Index == 30) != (r.Status == pipeline.StatusFailed) {
			t.Errorf("result %d: index %d %s", i, r.Index, r.Status)
		}
	}
	// After the failure, no more than the window of inputs in progress (about 20 here).
	if n := len(sink.Results); n < 31 || n >= len(in) {
		t.Errorf("%d results, want the 31 up to the failure and those in progress", n)
	}
}

func TestGPUOptionsErrors(t *testing.T) {
	plan, err := pipeline.Compile(mustSteps(t, "decode | grayscale"))
	if err != nil {
		t.Fatal(err)
	}
	dev := fakeGPU(t, schedtest.FakeConfig{MaxDeviceBytes: 1 << 20})
	tests := []struct {
		name string
		gpu  Options
		want string
	}{
		{"no device", Options{}, "GPU options without a device"},
		{"negative", Options{Device: dev, Streams: -1}, "negative GPU setting"},
		{"negative linger", Options{Device: dev, Linger: -time.Millisecond}, "negative GPU setting"},
		{"batch too big for the budget", Options{Device: dev, Batch: 4096, PinnedBytes: 1 << 14}, "too small for 4 slots of batch 4096"},
		{"too many streams", Options{Device: dev, Streams: 65}, "streams 65 (max 64)"},
		{"budget too small", Options{Device: dev, PinnedBytes: 1000}, "budget of 0 MiB is too small for 4 slots of batch 16"},
		{"device memory", Options{Device: dev, SlotBytes: 1 << 20}, "device fake: executor on fake: DevAlloc: out of memory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			gpu := tt.gpu
			// Check finds the settings errors, the ones Run finds before starting the
			// device, without touching it.
			if tt.name != "device memory" {
				calls := dev.Calls()
				if err := Check(plan, pipeline.Options{Backend: &gpu}); err == nil || !strings.Contains(err.Error(), tt.want) {
					t.Errorf("Check: got %v, want %q", err, tt.want)
				}
				if after := dev.Calls(); !maps.Equal(after, calls) {
					t.Errorf("Check used the device: %v, then %v", calls, after)
				}
			}
			var report bytes.Buffer
			_, err := pipeline.Run(context.Background(), plan, pipeline.Inputs(pipeline.Input{Name: "a", Image: stages.NewImage(2, 2, 3)}), pipeline.Collect(),
				pipeline.Options{Backend: &gpu, Report: &report})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want %q", err, tt.want)
			}
			if tt.name == "device memory" {
				if !strings.HasPrefix(report.String(), `{"summary":`) {
					t.Errorf("report: %q", report.String())
				}
				if l := dev.Live(); l != (schedtest.FakeLive{}) {
					t.Errorf("device memory left: %+v", l)
				}
			}
		})
	}
}

func TestCheckGPUAcceptsGoodSettings(t *testing.T) {
	plan, err := pipeline.Compile(mustSteps(t, "decode | grayscale"))
	if err != nil {
		t.Fatal(err)
	}
	dev := fakeGPU(t, schedtest.FakeConfig{MaxDeviceBytes: 1 << 30})
	for _, gpu := range []*Options{nil, {Device: dev}, {Device: dev, Streams: 4, Batch: 8, PinnedBytes: 256 << 20, Linger: time.Millisecond}} {
		opt := pipeline.Options{}
		if gpu != nil {
			opt.Backend = gpu
		}
		if err := Check(plan, opt); err != nil {
			t.Errorf("%+v: %v", gpu, err)
		}
	}
}

// --pinned-mb: the slots take what fits in the budget, and no more (their page-locked output
// sized by hostOutFor). When files go to the
// device, the page-locked input is a share of the device input (hostInFor), so the same
// budget gives slots over 1.5 times larger on the device.
func TestSlotBytesForBudget(t *testing.T) {
	dev := fakeGPU(t, schedtest.FakeConfig{})
	for _, spec := range []string{"grayscale | blur | transpose | histogram", "histogram", "blur sigma=3", "resize width=64 height=64 fit=inside"} {
		for _, budget := range []int64{1 << 20, 5 << 20, 17<<20 + 12345} {
			steps, err := pipeline.ParseSpec(spec)
			if err != nil {
				t.Fatal(err)
			}
			ops, err := pipeline.DeviceOps(steps)
			if err != nil {
				t.Fatal(err)
			}
			slot := map[bool]int{}
			for _, files := range []bool{false, true} {
				if files && spec == "histogram" {
					continue // a run whose device ops make no image decodes no file there
				}
				cfg := sched.Config{Ops: ops, Streams: 2, Slots: 4, Batch: 16}
				cfg.SlotBytes, err = slotBytesFor(dev, cfg, budget, files)
				if err != nil {
					t.Fatal(err)
				}
				cfg = withHostBuffers(cfg, files)
				slot[files] = cfg.SlotBytes
				cfg.MaxHostBytes = budget
				e, err := sched.New(context.Background(), dev, cfg)
				if err != nil {
					t.Fatalf("%s, %d MiB, files %v: %v", spec, budget>>20, files, err)
				}
				host := e.Stats().HostBytes
				e.Close()
				if host > budget || host < budget-int64(cfg.Slots)*3*sched.Align {
					t.Errorf("%s, files %v: %d bytes of slots for a budget of %d", spec, files, host, budget)
				}
			}
			if spec != "histogram" && slot[true] <= slot[false]*3/2 {
				t.Errorf("%s, %d bytes: slots of %d bytes with files, %d without", spec, budget, slot[true], slot[false])
			}
		}
	}
}
