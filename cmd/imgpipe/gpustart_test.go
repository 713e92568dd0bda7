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
	"github.com/imgpipe/imgpipe/pipeline"
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
