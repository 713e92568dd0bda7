package gpu

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/imgpipe/imgpipe/pipeline"
	"github.com/imgpipe/imgpipe/stages/stagestest"

	"github.com/imgpipe/imgpipe/cudastage/sched"
	"github.com/imgpipe/imgpipe/cudastage/sched/schedtest"
)

// A GPU run whose device is still opening runs its first inputs wholly on the CPU, with
// the device's bits; a device that fails to open fails the run, or leaves it on the CPU
// under Optional; an interrupt while the device opens ends the run as on the CPU. Each
// case opens (or fails) the fake device, or interrupts the run, once `at` results were
// reported.
func TestGPUStartsOnCPU(t *testing.T) {
	const n = 40
	rng := rand.New(rand.NewSource(9))
	inputs := make([]pipeline.Input, n)
	for i := range inputs {
		inputs[i] = pipeline.Input{Name: fmt.Sprintf("in/%02d.png", i), Data: stagestest.Encode(t, stagestest.ReadImage(rng, 20+i, 17, 3), "png")}
	}
	plan, err := pipeline.Compile(mustSteps(t, "decode | blur sigma=1.5 | save"))
	if err != nil {
		t.Fatal(err)
	}
	cpuOut := t.TempDir()
	if _, err := pipeline.Run(context.Background(), plan, pipeline.Inputs(inputs...), pipeline.ToFolder(cpuOut), pipeline.Options{Workers: 2}); err != nil {
		t.Fatal(err)
	}
	openFailed := errors.New("CUDA_ERROR_DEVICE_UNAVAILABLE")
	noSuch := fmt.Errorf("%w 7: the driver sees 1 GPU", sched.ErrNoSuchDevice)
	tests := []struct {
		name      string
		at        int   // results reported when the device opens (or fails to), or the run is interrupted
		openErr   error // the device fails to open with it
		optional  bool
		interrupt bool
		wait      bool // Options.Wait: the device opens 20 ms into the run
		// gate holds back the inputs after the first at until the run ends ("end") or gives
		// its notice ("notice"): until the device's failure is known.
		gate string
		// wantErr is what Run returns; cpuStart the least CPUStart (n: exactly n); device the
		// summary's device.
		wantErr  error
		cpuStart int
		device   string
	}{
		{name: "opens after every input", at: n, cpuStart: n, device: "fake"},
		{name: "opens midway", at: 5, cpuStart: 5, device: "fake"},
		{name: "waits under Wait", at: -1, wait: true, device: "fake"},
		{name: "fails to open", at: 5, openErr: openFailed, gate: "end", wantErr: openFailed, cpuStart: 5, device: "fake"},
		{name: "fails to open under auto", at: 5, openErr: openFailed, optional: true, gate: "notice", device: "cpu"},
		{name: "no such GPU under auto", at: 5, openErr: noSuch, optional: true, gate: "end", wantErr: sched.ErrNoSuchDevice, cpuStart: 5, device: "fake"},
		{name: "interrupted while opening", at: 5, interrupt: true, gate: "end", wantErr: context.Canceled, cpuStart: 5, device: "fake"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			base := runtime.NumGoroutine()
			opened := make(chan struct{})
			dev := fakeGPU(t, schedtest.FakeConfig{Opened: opened, OpenErr: tt.openErr})
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			out := t.TempDir()
			var report bytes.Buffer
			var notices []string
			noticed := make(chan struct{})
			src := &gatedSource{in: inputs, at: tt.at}
			switch tt.gate {
			case "notice":
				src.gate = noticed
			case "end":
				src.gate = make(chan struct{}) // never: the run's end releases it
			}
			if tt.wait {
				time.AfterFunc(20*time.Millisecond, func() { close(opened) })
			}
			reported := 0
			sum, err := pipeline.Run(ctx, plan, src, pipeline.ToFolder(out), pipeline.Options{Workers: 2, Report: &report,
				Notice: func(msg string) {
					if notices = append(notices, msg); len(notices) == 1 {
						close(noticed)
					}
				},
				Progress: func(*pipeline.Result) {
					if reported++; reported == tt.at {
						if tt.interrupt {
							cancel()
						}
						close(opened)
					}
				},
				Backend: &Options{Device: dev, Streams: 2, Batch: 4, SlotBytes: 64 << 10, Optional: tt.optional, Wait: tt.wait}})
			switch {
			case tt.wantErr == nil && err != nil, tt.wantErr != nil && !errors.Is(err, tt.wantErr):
				t.Fatalf("Run = %v, want %v", err, tt.wantErr)
			case tt.wantErr == nil && sum.OK != n:
				t.Errorf("%d ok, want %d: %+v", sum.OK, n, sum)
			case sum.OK < tt.at || sum.Device != tt.device:
				t.Errorf("%d ok on %q, want at least %d on %q", sum.OK, sum.Device, max(tt.at, 0), tt.device)
			}
			if tt.cpuStart == n && (sum.CPUStart != n || sum.Batches != 0) {
				t.Errorf("%d inputs started on the CPU and %d batches ran, want %d and none", sum.CPUStart, sum.Batches, n)
			}
			if tt.wait && (sum.CPUStart != 0 || sum.Batches == 0) {
				t.Errorf("%d inputs started on the CPU and %d batches ran, want none and some", sum.CPUStart, sum.Batches)
			}
			if sum.CPUStart < tt.cpuStart || sum.CPUStart > sum.Total() {
				t.Errorf("%d inputs started on the CPU of %d reported, want at least %d", sum.CPUStart, sum.Total(), tt.cpuStart)
			}
			if (tt.device == "cpu") != (len(notices) == 1 && strings.Contains(notices[0], "no usable GPU ("+dev.Name()+": "+openFailed.Error())) {
				t.Errorf("notices %q", notices)
			}
			if tt.interrupt != sum.Interrupted {
				t.Errorf("interrupted %v, want %v", sum.Interrupted, tt.interrupt)
			}
			// Every output reported is the CPU's, byte for byte, and no other was written.
			checkOutputsMatchReport(t, out, report.String(), sum.OK)
			files, _ := filepath.Glob(filepath.Join(out, "in", "*.png"))
			for _, f := range files {
				got, _ := os.ReadFile(f)
				want, err := os.ReadFile(filepath.Join(cpuOut, "in", filepath.Base(f)))
				if err != nil || !bytes.Equal(got, want) {
					t.Errorf("%s differs from the CPU run's (%v)", f, err)
				}
			}
			checkNoLeaks(t, base)
			if l := dev.Live(); l != (schedtest.FakeLive{}) {
				t.Errorf("device memory left: %+v", l)
			}
		})
	}
}

// gatedSource yields in, holding back those after the first at until gate is closed; once
// the run ends, it ends too.
type gatedSource struct {
	in   []pipeline.Input
	at   int
	gate chan struct{} // nil: no gate
	i    int
}

func (s *gatedSource) Next(ctx context.Context) (pipeline.Input, error) {
	if s.i == s.at && s.gate != nil {
		select {
		case <-s.gate:
		case <-ctx.Done():
			return pipeline.Input{}, io.EOF
		}
	}
	if s.i == len(s.in) {
		return pipeline.Input{}, io.EOF
	}
	s.i++
	return s.in[s.i-1], nil
}
