package cudastage

import (
	"fmt"
	"os"
	"regexp"
	"strings"

	"github.com/imgpipe/imgpipe/cudastage/cu"
)

// DeviceInfo describes one GPU, for `imgpipe devices`.
type DeviceInfo struct {
	Index             int    `json:"index"`
	Name              string `json:"name"`
	ComputeCapability string `json:"compute_capability"` // "9.0"
	Major             int    `json:"cc_major"`
	Minor             int    `json:"cc_minor"`
	SMs               int    `json:"sms"`
	TotalMemory       uint64 `json:"total_memory_bytes"`
	AsyncEngines      int    `json:"async_copy_engines"`
	DriverVersion     int    `json:"driver_api_version"`       // cuDriverGetVersion, e.g. 13000
	CUDAVersion       string `json:"cuda_version"`             // the same decoded, e.g. "13.0"
	DriverRelease     string `json:"driver_release,omitempty"` // kernel module release, e.g. "580.65.06", when readable
}

// String formats the device on one line.
func (d DeviceInfo) String() string {
	drv := ""
	if d.DriverRelease != "" {
		drv = ", driver " + d.DriverRelease
	}
	return fmt.Sprintf("%d: %s, compute capability %s, %d SMs, %.1f GiB, %d async copy engines, CUDA %s%s",
		d.Index, d.Name, d.ComputeCapability, d.SMs, float64(d.TotalMemory)/(1<<30), d.AsyncEngines, d.CUDAVersion, drv)
}

// Devices lists the GPUs the driver sees. With no usable GPU the error says
// why: it wraps cu.ErrNoDriver (libcuda not found), cu.ErrNoDevice or
// cu.ErrDriverTooOld (CUDA older than 12.0).
func Devices() ([]DeviceInfo, error) {
	if err := cu.Load(); err != nil {
		return nil, err
	}
	ver, err := cu.DriverVersion()
	if err != nil {
		return nil, err
	}
	n, err := cu.DeviceCount()
	if err != nil {
		return nil, err
	}
	release := driverRelease()
	infos := make([]DeviceInfo, 0, n)
	for i := range n {
		info, err := deviceInfo(i)
		if err != nil {
			return nil, fmt.Errorf("GPU %d: %w", i, err)
		}
		info.DriverVersion, info.CUDAVersion, info.DriverRelease = ver, cu.VersionString(ver), release
		infos = append(infos, info)
	}
	return infos, nil
}

func deviceInfo(i int) (DeviceInfo, error) {
	info := DeviceInfo{Index: i}
	dev, err := cu.DeviceGet(i)
	if err != nil {
		return info, err
	}
	if info.Name, err = dev.Name(); err != nil {
		return info, err
	}
	if info.Major, info.Minor, err = dev.ComputeCapability(); err != nil {
		return info, err
	}
	info.ComputeCapability = fmt.Sprintf("%d.%d", info.Major, info.Minor)
	if info.SMs, err = dev.Attribute(cu.MultiprocessorCount); err != nil {
		return info, err
	}
	if info.AsyncEngines, err = dev.Attribute(cu.AsyncEngineCount); err != nil {
		return info, err
	}
	if info.TotalMemory, err = dev.TotalMem(); err != nil {
		return info, err
	}
	return info, nil
}

// driverRelease reads the kernel module's release ("580.65.06") from
// /proc/driver/nvidia/version, which the driver API does not report; "" when
// it cannot.
func driverRelease() string {
	b, err := os.ReadFile("/proc/driver/nvidia/version")
	if err != nil {
		return ""
	}
	return parseDriverRelease(string(b))
}

// releaseRE matches a driver release number such as 580.65.06.
var releaseRE = regexp.MustCompile(`\b\d+\.\d+(?:\.\d+)?\b`)

// parseDriverRelease extracts the release from the first line, e.g.
// "NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.65.06  Sun Jul 27 ..."
// or "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.65.06 ...".
func parseDriverRelease(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	if !strings.HasPrefix(line, "NVRM version:") {
		return ""
	}
	_, rest, ok := strings.Cut(line, "Kernel Module")
	if !ok {
		return ""
	}
	return releaseRE.FindString(rest)
}
