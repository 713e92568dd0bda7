package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/imgpipe/imgpipe/cudastage"
	"github.com/imgpipe/imgpipe/cudastage/sched"
	"github.com/imgpipe/imgpipe/cudastage/sched/schedtest"
	"github.com/imgpipe/imgpipe/pipeline"
	"github.com/imgpipe/imgpipe/pipeline/gpu"
	"github.com/imgpipe/imgpipe/pipeline/job"
)

// A GPU that fails to open in the background (after the run started on the CPU): under
// auto the run goes on on the CPU with one notice; under cuda it stops with exit 3; a GPU
// that does not exist is a mistake under auto too.
func TestGPUFailsToOpen(t *testing.T) {
	in := deviceFolder(t)
	const spec = "decode | blur sigma=1 | save"
	unavailable := errors.New("cuDevicePrimaryCtxRetain: CUDA_ERROR_DEVICE_UNAVAILABLE")
	missing := fmt.Errorf("cudastage: %w 7: the driver sees 1 GPU, numbered 0", cudastage.ErrNoSuchGPU)
	tests := []struct {
		name, device string
		openErr      error
		wantCode     int
		wantStderr   string
	}{
		{"auto", "auto", unavailable, exitSomeFailed, "imgpipe: no usable GPU (fake: " + unavailable.Error() + "); running on the CPU"},
		{"cuda", "cuda", unavailable, exitFatal, unavailable.Error()},
		{"no such GPU under auto", "auto", missing, exitFatal, "'imgpipe devices' lists them"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fakeDevice(t, schedtest.FakeConfig{OpenErr: tt.openErr})
			if tt.wantCode == exitSomeFailed { // the broken files fail, as on the CPU
				_, sum, stderr := compareDevices(t, in, spec, tt.device)
				if sum.Device != "cpu" || strings.Count(stderr, "no usable GPU") != 1 || !strings.Contains(stderr, tt.wantStderr) {
					t.Errorf("on %q:\n%s", sum.Device, stderr)
				}
				return
			}
			code, _, stderr := cli(t, "run", "-i", in, "-o", filepath.Join(t.TempDir(), "out"), "-p", spec, "--device", tt.device)
			if code != tt.wantCode || !strings.Contains(stderr, tt.wantStderr) {
				t.Errorf("exit %d, want %d; stderr:\n%s", code, tt.wantCode, stderr)
			}
		})
	}
}

// A run that the CPU finishes while the GPU is still opening neither waits for it to open
// nor for it to close: every input ran on the CPU, and the GPU is closed in the background
// once it opened.
func TestGPUStillOpeningAtTheEnd(t *testing.T) {
	in := deviceFolder(t)
	opened := make(chan struct{})
	closed := make(chan struct{})
	setOpenDevice(t, func(int) (sched.Device, func() error, error) {
		d := schedtest.NewFake(schedtest.FakeConfig{Opened: opened})
		return d, func() error {
			<-d.Ready() // as the CUDA device's close waits for its opening
			d.Close()
			close(closed)
			return nil
		}, nil
	})
	// Were the run to wait for the GPU, it would open after 20 s and the run end then.
	timer := time.AfterFunc(20*time.Second, func() { close(opened) })
	_, sum, stderr := compareDevices(t, in, "decode | blur sigma=1 | save", "cuda")
	if !timer.Stop() {
		t.Fatal("the run waited for the GPU to open")
	}
	if sum.Device != "fake" || sum.CPUStart != sum.Total() || sum.Batches != 0 {
		t.Errorf("summary %+v\n%s", sum, stderr)
	}
	close(opened)
	select {
	case <-closed:
	case <-time.After(20 * time.Second):
		t.Error("the GPU was not closed once it opened")
	}
}

// bench and the queue worker wait for the GPU to open (resolveDevice's wait), so that a GPU
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
		closes := fakeDevice(t, schedtest.FakeConfig{OpenErr: unavailable})
		var stderr strings.Builder
		tgt, err := resolveDevice(tt.device, pipeline.GPUSet("0"), "", tt.wait, &stderr)
		switch {
		case tt.wantErr:
			if err == nil || !strings.Contains(err.Error(), unavailable.Error()) || closes.Load() != 1 {
				t.Errorf("%s, wait %v: %v (closed %d times), want the open error", tt.device, tt.wait, err, closes.Load())
			}
		case err != nil || len(tgt.devs) != tt.wantGPUs:
			t.Errorf("%s, wait %v: %v, %d GPUs, want %d", tt.device, tt.wait, err, len(tgt.devs), tt.wantGPUs)
		case tt.wantGPUs == 0 && (tgt.why == "" || !strings.Contains(stderr.String(), "no usable GPU") || closes.Load() != 1):
			t.Errorf("%s, wait %v: why %q, closed %d times; stderr %q", tt.device, tt.wait, tgt.why, closes.Load(), stderr.String())
		}
		if tgt != nil {
			tgt.close()
		}
	}
}

// Under auto, a run over a local folder that the CPU finishes sooner than a GPU opens
// leaves the GPU unstarted (no driver work, nothing to wait for at exit), and says so;
// under cuda the GPU starts as soon as it is opened.
func TestAutoLeavesGPUUnstarted(t *testing.T) {
	in := deviceFolder(t)
	for _, device := range []string{"auto", "cuda"} {
		t.Run(device, func(t *testing.T) {
			opened := make(chan struct{}) // the GPU never opens by itself
			defer close(opened)
			var dev *schedtest.FakeDevice
			setOpenDevice(t, func(int) (sched.Device, func() error, error) {
				dev = schedtest.NewFake(schedtest.FakeConfig{Opened: opened})
				return dev, func() error { dev.Close(); return nil }, nil
			})
			// More workers than inputs: they take every input at once, so that however slow
			// the machine, none is left for the GPU.
			_, sum, stderr := compareDevices(t, in, "decode | blur sigma=1 | save", device, "--workers", "64")
			auto := device == "auto"
			if dev.Started() == auto || sum.GPUNotStarted != auto {
				t.Errorf("started %v, report's gpu_not_started %v, want %v", dev.Started(), sum.GPUNotStarted, !auto)
			}
			wantDevice, note := "fake", strings.Contains(stderr, "the GPU was not started")
			if auto {
				wantDevice = "cpu"
			}
			if sum.Device != wantDevice || note != auto {
				t.Errorf("on %q, want %q; stderr:\n%s", sum.Device, wantDevice, stderr)
			}
		})
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
			in, err := openInputs(context.Background(), &job.Job{InputDir: tt.dir}, pipeline.Selection{}, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer in.close()
			var o gpu.Options
			countForGPU(context.Background(), in, &o, &target{devs: []sched.Device{dev}}, tt.limit)
			if o.Inputs != tt.wantInputs || dev.Started() != tt.started {
				t.Errorf("inputs %d, started %v; want %d, %v", o.Inputs, dev.Started(), tt.wantInputs, tt.started)
			}
		})
	}
}
