package main

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/imgpipe/imgpipe/cudastage"
	"github.com/imgpipe/imgpipe/cudastage/sched"
	"github.com/imgpipe/imgpipe/cudastage/sched/schedtest"
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
