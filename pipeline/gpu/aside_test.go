package gpu

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"os"
	"path/filepath"
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/imgpipe/imgpipe/pipeline"

	"github.com/imgpipe/imgpipe/cudastage/sched"
	"github.com/imgpipe/imgpipe/cudastage/sched/schedtest"
	"github.com/imgpipe/imgpipe/stages/jpegturbo"
	"github.com/imgpipe/imgpipe/stages/stagestest"
)

// While the device opens, the inputs it decodes whole (baseline JPEGs, for turbo-cuda) are
// set aside for it, and the others run on the CPU; the CPU takes set-aside inputs when the
// source has nothing ready, so none waits for a device that opens late or never. Whatever
// happens, every output is the CPU run's and every goroutine ends. Only a sink that keeps
// no image gets this (a set-aside input's result waits to be reported in input order).
func TestSetAsideWhileOpening(t *testing.T) {
	if jpegturbo.Available() != nil {
		t.Skip("libjpeg-turbo not usable here")
	}
	rng := rand.New(rand.NewSource(3))
	var inputs []pipeline.Input
	baseline := 0
	for i := range 12 {
		name, data := fmt.Sprintf("in/%02d.jpg", i), stagestest.Encode(t, stagestest.ReadImage(rng, 30+i, 21, 3), "jpeg")
		switch i % 4 {
		case 0, 1: // baseline: the device decodes them whole
			baseline++
		case 2: // progressive at full size: the CPU decodes it
			p, err := os.ReadFile(filepath.Join("..", "..", "stages", "testdata", "progressive", []string{"p420", "p444", "gray"}[i/4]+".jpg"))
			if err != nil {
				t.Fatal(err)
			}
			data = p
		case 3:
			name, data = fmt.Sprintf("in/%02d.png", i), stagestest.Encode(t, stagestest.ReadImage(rng, 30+i, 21, 3), "png")
		}
		inputs = append(inputs, pipeline.Input{Name: name, Data: data})
	}
	bad := stagestest.Encode(t, stagestest.ReadImage(rng, 9, 9, 3), "jpeg")
	inputs = append(inputs, pipeline.Input{Name: "in/bad.jpg", Data: bad[:40]}) // its header is cut short
	n := len(inputs)
	plan := compileWith(t, pipeline.Builtin, "decode | flip axis=h | save format=png")
	cpuOut := t.TempDir()
	if _, err := pipeline.Run(context.Background(), plan, pipeline.Inputs(inputs...), pipeline.ToFolder(cpuOut), pipeline.Options{Workers: 2}); err != nil {
		t.Fatal(err)
	}
	openFailed := errors.New("CUDA_ERROR_DEVICE_UNAVAILABLE")
	tests := []struct {
		name string
		// open is when the device opens: "reported" once every input was, "source end" once
		// the source is read to its end, "never" (the run is interrupted at the first result).
		open     string
		openErr  error
		keep     bool // the sink keeps images (Collect)
		objects  bool // the inputs are objects in a bucket (Input.Open), each to be read once
		optional bool
		// setAside is the least Summary.SetAside, or -1 for exactly 0; cpuStart the exact
		// CPUStart, or -1 for any.
		setAside, cpuStart int
		device             string
	}{
		{name: "opens after every input", open: "reported", setAside: baseline, cpuStart: n, device: "fake"},
		{name: "opens when the source ends", open: "source end", setAside: 1, cpuStart: -1, device: "fake"},
		// The run is then on the CPU, and its summary has no GPU figures.
		{name: "fails to open under auto", open: "source end", openErr: openFailed, optional: true, setAside: -1, cpuStart: -1, device: "cpu"},
		{name: "sink keeps images", open: "source end", keep: true, setAside: -1, cpuStart: -1, device: "fake"},
		{name: "objects in a bucket", open: "source end", objects: true, setAside: -1, cpuStart: -1, device: "fake"},
		{name: "interrupted while opening", open: "never", setAside: 1, cpuStart: -1, device: "fake"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			base := runtime.NumGoroutine()
			opened := make(chan struct{})
			dev := schedtest.Turbo{FakeDevice: fakeGPU(t, schedtest.FakeConfig{Opened: opened, OpenErr: tt.openErr})}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var reads atomic.Int64
			in := inputs
			if tt.objects {
				in = make([]pipeline.Input, len(inputs))
				for i, x := range inputs {
					in[i] = pipeline.Input{Name: x.Name, Open: func(context.Context) (io.ReadCloser, int64, error) {
						reads.Add(1)
						return io.NopCloser(bytes.NewReader(x.Data)), int64(len(x.Data)), nil
					}}
				}
			}
			var src pipeline.Source = pipeline.Inputs(in...)
			if tt.open == "source end" {
				src = &endSignal{Source: src, end: opened}
			}
			out := t.TempDir()
			var sink pipeline.Sink = pipeline.ToFolder(out)
			if tt.keep {
				sink = pipeline.Collect()
			}
			var report bytes.Buffer
			reported := 0
			sum, err := pipeline.Run(ctx, plan, src, sink, pipeline.Options{Workers: 2, Report: &report, Notice: func(string) {},
				Progress: func(*pipeline.Result) {
					reported++
					switch {
					case tt.open == "never" && reported == 1:
						cancel()
					case tt.open == "reported" && reported == n:
						close(opened)
					}
				},
				Backend: &Options{Device: dev, Streams: 2, Batch: 2, SlotBytes: 64 << 10, Optional: tt.optional}})
			if tt.open == "never" {
				if !errors.Is(err, context.Canceled) || !sum.Interrupted {
					t.Fatalf("Run = %v (interrupted %v), want interrupted", err, sum.Interrupted)
				}
			} else if err != nil || sum.OK != n-1 || sum.Failed != 1 {
				t.Fatalf("Run = %v: %d ok, %d failed, want %d and 1", err, sum.OK, sum.Failed, n-1)
			}
			if sum.Device != tt.device {
				t.Errorf("device %q, want %q", sum.Device, tt.device)
			}
			if tt.setAside < 0 && sum.SetAside != 0 || sum.SetAside < tt.setAside || sum.SetAside > baseline {
				t.Errorf("%d set aside, want at least %d and at most %d", sum.SetAside, tt.setAside, baseline)
			}
			if tt.cpuStart >= 0 && (sum.CPUStart != tt.cpuStart || sum.Batches != 0) {
				t.Errorf("%d started on the CPU in %d batches, want %d and none", sum.CPUStart, sum.Batches, tt.cpuStart)
			}
			if tt.objects && reads.Load() != int64(n) {
				t.Errorf("%d objects read, want %d: each once", reads.Load(), n)
			}
			if tt.keep {
				return
			}
			// Every output reported is the CPU's, byte for byte; a baseline JPEG was decoded
			// by turbo-cuda or on the CPU, the others on the CPU.
			checkOutputsMatchReport(t, out, report.String(), sum.OK)
			for _, l := range reportLines(t, report.String()) {
				var rl pipeline.ReportLine
				if err := json.Unmarshal([]byte(l), &rl); err != nil || rl.Status != pipeline.StatusOK {
					continue
				}
				got, _ := os.ReadFile(filepath.Join(out, rl.Output))
				want, err := os.ReadFile(filepath.Join(cpuOut, rl.Output))
				if err != nil || !bytes.Equal(got, want) {
					t.Errorf("%s differs from the CPU run's (%v)", rl.Output, err)
				}
				if rl.Decoder == sched.RouteTurbo && filepath.Ext(rl.Input) != ".jpg" {
					t.Errorf("%s decoded by %s", rl.Input, rl.Decoder)
				}
			}
			checkNoLeaks(t, base)
		})
	}
}

// endSignal is a source that closes end when it is read to its end.
type endSignal struct {
	pipeline.Source
	end  chan struct{}
	done bool
}

func (s *endSignal) Next(ctx context.Context) (pipeline.Input, error) {
	in, err := s.Source.Next(ctx)
	if errors.Is(err, io.EOF) && !s.done {
		s.done = true
		close(s.end)
	}
	return in, err
}

// StopOnError with inputs set aside: every input up to the first failure is still run
// (the set-aside ones too) and reported, with the CPU run's bytes, and the run stops.
func TestSetAsideStopOnError(t *testing.T) {
	if jpegturbo.Available() != nil {
		t.Skip("libjpeg-turbo not usable here")
	}
	base := runtime.NumGoroutine()
	rng := rand.New(rand.NewSource(4))
	inputs := make([]pipeline.Input, 40)
	for i := range inputs {
		inputs[i] = pipeline.Input{Name: fmt.Sprintf("in/%02d.jpg", i), Data: stagestest.Encode(t, stagestest.ReadImage(rng, 24+i, 17, 3), "jpeg")}
	}
	const bad = 10
	inputs[bad].Data = inputs[bad].Data[:40]
	plan := compileWith(t, pipeline.Builtin, "decode | flip axis=v | save format=png")
	cpuOut := t.TempDir()
	if _, err := pipeline.Run(context.Background(), plan, pipeline.Inputs(inputs...), pipeline.ToFolder(cpuOut), pipeline.Options{Workers: 2}); err != nil {
		t.Fatal(err)
	}
	opened := make(chan struct{})
	dev := schedtest.Turbo{FakeDevice: fakeGPU(t, schedtest.FakeConfig{Opened: opened})}
	out := t.TempDir()
	var report bytes.Buffer
	reported := 0
	sum, err := pipeline.Run(context.Background(), plan, pipeline.Inputs(inputs...), pipeline.ToFolder(out), pipeline.Options{Workers: 2, StopOnError: true, Report: &report,
		Progress: func(*pipeline.Result) {
			if reported++; reported == 1 {
				close(opened)
			}
		},
		Backend: &Options{Device: dev, Streams: 2, Batch: 2, SlotBytes: 64 << 10}})
	if !errors.Is(err, pipeline.ErrStopped) || !sum.Stopped || sum.Failed != 1 || sum.SetAside == 0 {
		t.Fatalf("Run = %v, summary %+v: want stopped at one failure, with inputs set aside", err, sum)
	}
	var names []string
	for _, l := range reportLines(t, report.String()) {
		var rl pipeline.ReportLine
		if err := json.Unmarshal([]byte(l), &rl); err != nil || rl.Input == "" {
			continue
		}
		names = append(names, rl.Input)
		if rl.Status == pipeline.StatusOK {
			got, _ := os.ReadFile(filepath.Join(out, rl.Output))
			want, err := os.ReadFile(filepath.Join(cpuOut, rl.Output))
			if err != nil || !bytes.Equal(got, want) {
				t.Errorf("%s differs from the CPU run's (%v)", rl.Output, err)
			}
		}
	}
	for i := 0; i <= bad; i++ {
		if i >= len(names) || names[i] != inputs[i].Name {
			t.Fatalf("reported %q, want every input up to %s first, in order", names, inputs[bad].Name)
		}
	}
	checkNoLeaks(t, base)
}
