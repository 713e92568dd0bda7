package main

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/imgpipe/imgpipe/cudastage"
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
