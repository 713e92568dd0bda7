package cudastage

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/imgpipe/imgpipe/cudastage/cu"
	"github.com/imgpipe/imgpipe/cudastage/cutest"
)

func TestParseDriverRelease(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.65.06  Sun Jul 27 07:09:24 UTC 2025\nGCC version:  gcc 13.3.0\n", "580.65.06"},
		{"NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.95.05  Release Build  (dvs-builder@U16)\n", "580.95.05"},
		{"NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.183\n", "535.183"},
		{"", ""},
		{"something else 1.2.3\n", ""},
		{"NVRM version: weird\n", ""},
	} {
		if got := parseDriverRelease(tc.in); got != tc.want {
			t.Errorf("parseDriverRelease(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestDeviceInfoStringAndJSON(t *testing.T) {
	d := DeviceInfo{Index: 0, Name: "NVIDIA H200", ComputeCapability: "9.0", Major: 9, SMs: 132,
		TotalMemory: 150 << 30, AsyncEngines: 3, DriverVersion: 13000, CUDAVersion: "13.0", DriverRelease: "580.65.06"}
	want := "0: NVIDIA H200, compute capability 9.0, 132 SMs, 150.0 GiB, 3 async copy engines, CUDA 13.0, driver 580.65.06"
	if got := d.String(); got != want {
		t.Errorf("String() = %q\nwant      %q", got, want)
	}
	b, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{`"index":0`, `"name":"NVIDIA H200"`, `"compute_capability":"9.0"`, `"sms":132`,
		`"total_memory_bytes":161061273600`, `"async_copy_engines":3`, `"driver_api_version":13000`, `"cuda_version":"13.0"`} {
		if !strings.Contains(string(b), key) {
			t.Errorf("JSON %s lacks %s", b, key)
		}
	}
}

// TestDevices lists the GPUs, or checks that the error says why there are
// none. Under IMGPIPE_REQUIRE_GPU=1 no GPU is a failure.
func TestDevices(t *testing.T) {
	infos, err := Devices()
	if err != nil {
		if cutest.Required() {
			t.Fatalf("GPU required: %v", err)
		}
		if !errors.Is(err, cu.ErrNoDriver) && !errors.Is(err, cu.ErrNoDevice) && !errors.Is(err, cu.ErrDriverTooOld) {
			t.Errorf("Devices() = %v: the error does not say why (no driver / no device / too old)", err)
		}
		t.Logf("no GPU: %v", err)
		return
	}
	if len(infos) == 0 {
		t.Fatal("Devices() returned no devices and no error")
	}
	for i, d := range infos {
		t.Logf("%s", d)
		if d.Index != i || d.Name == "" || d.Major < 5 || d.SMs < 1 || d.TotalMemory < 1<<30 ||
			d.AsyncEngines < 1 || d.DriverVersion < cu.MinDriverVersion || d.CUDAVersion != cu.VersionString(d.DriverVersion) ||
			d.ComputeCapability == "" {
			t.Errorf("implausible device %+v", d)
		}
	}
}
