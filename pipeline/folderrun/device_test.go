package folderrun

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/imgpipe/imgpipe/cudastage/sched"
	"github.com/imgpipe/imgpipe/cudastage/sched/schedtest"
	"github.com/imgpipe/imgpipe/pipeline"
	"github.com/imgpipe/imgpipe/pipeline/gpu"
)

// fakeGPU is a GPUs that opens a CPU fake of a GPU; closes counts its closing.
func fakeGPU(cfg schedtest.FakeConfig) (closes *atomic.Int32, g GPUs) {
	closes = new(atomic.Int32)
	g.Open = func(int) (sched.Device, func() error, error) {
		d := schedtest.NewFake(cfg)
		return d, func() error { closes.Add(1); d.Close(); return nil }, nil
	}
	return closes, g
}

// bench and the queue worker wait for the GPU to open (GPUs.Wait), so that a GPU
// the driver cannot open is a failure found before they start, as a missing driver is;
// run does not wait.
func TestResolveDeviceWaits(t *testing.T) {
	unavailable := errors.New("cuDevicePrimaryCtxRetain: CUDA_ERROR_DEVICE_UNAVAILABLE")
	tests := []struct {
		device   string
		wait     bool
		wantGPUs int
		wantErr  bool
	}{
		{"auto", true, 0, false},
		{"cuda", true, 0, true},
		{"auto", false, 1, false},
		{"cuda", false, 1, false},
	}
	for _, tt := range tests {
		closes, g := fakeGPU(schedtest.FakeConfig{OpenErr: unavailable})
		g.Wait = tt.wait
		var stderr strings.Builder
		tgt, err := OpenDevices(tt.device, pipeline.GPUSet("0"), g, func(msg string) { fmt.Fprintf(&stderr, "imgpipe: %s\n", msg) })
		switch {
		case tt.wantErr:
			if err == nil || !strings.Contains(err.Error(), unavailable.Error()) || closes.Load() != 1 {
				t.Errorf("%s, wait %v: %v (closed %d times), want the open error", tt.device, tt.wait, err, closes.Load())
			}
		case err != nil || len(tgt.GPUs) != tt.wantGPUs:
			t.Errorf("%s, wait %v: %v, %d GPUs, want %d", tt.device, tt.wait, err, len(tgt.GPUs), tt.wantGPUs)
		case tt.wantGPUs == 0 && (tgt.Why == "" || !strings.Contains(stderr.String(), "no usable GPU") || closes.Load() != 1):
			t.Errorf("%s, wait %v: why %q, closed %d times; stderr %q", tt.device, tt.wait, tgt.Why, closes.Load(), stderr.String())
		}
		if tgt != nil {
			tgt.Close()
		}
	}
}

// countForGPU gives the run the count of a local folder's inputs up to the limit, and
// starts the GPU at once for more, or for inputs it cannot count.
func TestCountForGPU(t *testing.T) {
	dir, tree := t.TempDir(), t.TempDir()
	for _, d := range []string{dir, filepath.Join(tree, "sub")} {
		for _, name := range []string{"a.png", "b.jpg", "c.png"} {
			if err := os.MkdirAll(d, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(d, name), []byte("x"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	tests := []struct {
		name       string
		dir        string
		limit      int
		wantInputs int
		started    bool
	}{
		{"within the limit", dir, 3, 3, false},
		{"more entries than the limit", dir, 2, 0, true},
		{"a folder that cannot be walked", filepath.Join(dir, "missing"), 10, 0, true},
		{"a tree within the limit", tree, 3, 3, false},
		// One entry at the top, so walked: its subfolder holds more than the limit.
		{"a tree over the limit", tree, 2, 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dev := schedtest.NewFake(schedtest.FakeConfig{Opened: make(chan struct{})})
			in, err := openInputs(context.Background(), &Request{Input: tt.dir}, pipeline.Selection{})
			if err != nil {
				t.Fatal(err)
			}
			defer in.close()
			var o gpu.Options
			countForGPU(context.Background(), in, &o, &Devices{GPUs: []sched.Device{dev}}, tt.limit)
			if o.Inputs != tt.wantInputs || dev.Started() != tt.started {
				t.Errorf("inputs %d, started %v; want %d, %v", o.Inputs, dev.Started(), tt.wantInputs, tt.started)
			}
		})
	}
}
