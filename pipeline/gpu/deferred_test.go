package gpu

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/imgpipe/imgpipe/pipeline"
	"github.com/imgpipe/imgpipe/stages/stagestest"

	"github.com/imgpipe/imgpipe/cudastage/sched/schedtest"
)

func TestWorthStarting(t *testing.T) {
	const ms = time.Millisecond
	tests := []struct {
		name               string
		total, taken, done int64
		elapsed            time.Duration
		workers            int
		want               bool
	}{
		{"every input taken", 50, 50, 10, 20 * ms, 16, false},
		{"more taken than counted", 50, 60, 10, 20 * ms, 16, true},
		// Until each worker has done one, an input costs at least the time so far:
		// 584 × 1 ms / 16, then 584 × 20 ms / 16.
		{"none done, early", 600, 16, 0, 1 * ms, 16, false},
		{"none done, the time so far bounds the pace", 600, 16, 0, 20 * ms, 16, true},
		{"a few quick ones done", 600, 24, 8, 20 * ms, 16, true},
		// About a photo a millisecond: 168 left take 0.16 s, 1,768 1.7 s.
		{"200 photos", 200, 32, 16, 15 * ms, 16, false},
		{"1,800 photos", 1800, 32, 16, 15 * ms, 16, true},
		{"two workers", 100, 2, 2, 20 * ms, 2, true},
		// 50 × 160 ms / 16 is the start cost itself: the CPU is as fast.
		{"exactly the start cost", 66, 16, 16, 160 * ms, 16, false},
	}
	for _, tt := range tests {
		if got := worthStarting(tt.total, tt.taken, tt.done, tt.elapsed, tt.workers); got != tt.want {
			t.Errorf("%s: worthStarting = %v, want %v", tt.name, got, tt.want)
		}
	}
}

// Under Optional with a count of the inputs, a run starts its devices only when the CPU's
// pace says they are worth it: a small run never starts them, and reports that it ran on
// the CPU. An unknown count starts them, as do slow inputs with many more to come; without
// Optional, or with Wait, Inputs is not used. The outputs are the CPU run's whatever
// happens, and every goroutine ends.
func TestDeferredGPUStart(t *testing.T) {
	rng := rand.New(rand.NewSource(6))
	inputs := make([]pipeline.Input, 12)
	for i := range inputs {
		inputs[i] = pipeline.Input{Name: fmt.Sprintf("in/%02d.png", i), Data: stagestest.Encode(t, stagestest.ReadImage(rng, 20+i, 15, 3), "png")}
	}
	n := len(inputs)
	plan := compileWith(t, pipeline.Builtin, "decode | flip axis=h | save format=png")
	cpuOut := t.TempDir()
	if _, err := pipeline.Run(context.Background(), plan, pipeline.Inputs(inputs...), pipeline.ToFolder(cpuOut), pipeline.Options{Workers: 2}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name           string
		inputs         int // Options.Inputs
		optional, wait bool
		// slow makes every input wait, when read, for the device to be started (or 10 s).
		slow    bool
		started bool
	}{
		{name: "small run", inputs: n, optional: true, started: false},
		{name: "count unknown", inputs: 0, optional: true, started: true},
		{name: "slow inputs, many to come", inputs: 10000, optional: true, slow: true, started: true},
		{name: "not optional", inputs: n, started: true},
		{name: "wait", inputs: n, optional: true, wait: true, started: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			base := runtime.NumGoroutine()
			opened := make(chan struct{})
			if tt.wait {
				close(opened) // a waiting run would otherwise wait for ever
			}
			dev := fakeGPU(t, schedtest.FakeConfig{Opened: opened})
			in := inputs
			if tt.slow {
				in = make([]pipeline.Input, n)
				for i, x := range inputs {
					in[i] = pipeline.Input{Name: x.Name, Open: func(context.Context) (io.ReadCloser, int64, error) {
						for deadline := time.Now().Add(10 * time.Second); !dev.Started() && time.Now().Before(deadline); {
							time.Sleep(time.Millisecond)
						}
						return io.NopCloser(bytes.NewReader(x.Data)), int64(len(x.Data)), nil
					}}
				}
			}
			out := t.TempDir()
			// As many workers as inputs: they take every input at once, so that however slow
			// the machine, the small run has none left for the GPU.
			sum, err := pipeline.Run(context.Background(), plan, pipeline.Inputs(in...), pipeline.ToFolder(out), pipeline.Options{Workers: n, Notice: func(string) {},
				Backend: &Options{Device: dev, Streams: 2, Batch: 2, SlotBytes: 64 << 10, Optional: tt.optional, Wait: tt.wait, Inputs: tt.inputs}})
			if err != nil || sum.OK != n {
				t.Fatalf("Run = %v: %d ok, want %d", err, sum.OK, n)
			}
			if dev.Started() != tt.started {
				t.Errorf("device started: %v, want %v", dev.Started(), tt.started)
			}
			wantDevice := "fake"
			if !tt.started {
				wantDevice = "cpu"
			}
			if sum.GPUNotStarted == tt.started || sum.Device != wantDevice || !tt.started && (sum.Streams != 0 || sum.CPUStart != 0) {
				t.Errorf("summary: not started %v on %q (%d streams, %d started on the CPU), want %v on %q",
					sum.GPUNotStarted, sum.Device, sum.Streams, sum.CPUStart, !tt.started, wantDevice)
			}
			sameFiles(t, out, cpuOut)
			if !tt.wait {
				close(opened)
			}
			checkNoLeaks(t, base)
		})
	}
}

// sameFiles checks that the folder got holds the files of want, byte for byte.
func sameFiles(t *testing.T, got, want string) {
	t.Helper()
	n := 0
	err := filepath.WalkDir(want, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(want, path)
		a, _ := os.ReadFile(filepath.Join(got, rel))
		b, err := os.ReadFile(path)
		if err != nil || !bytes.Equal(a, b) {
			t.Errorf("%s differs (%v)", rel, err)
		}
		n++
		return nil
	})
	if err != nil || n == 0 {
		t.Errorf("no files compared in %s (%v)", want, err)
	}
}
