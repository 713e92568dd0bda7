package cu

import (
	"fmt"
	"unsafe"
)

// Device is a CUDA device handle (CUdevice), obtained from DeviceGet.
type Device int32

// DeviceAttribute selects a device property (CUdevice_attribute).
type DeviceAttribute int32

// Device attributes, with the values of cuda.h.
const (
	MaxThreadsPerBlock               DeviceAttribute = 1
	MaxBlockDimX                     DeviceAttribute = 2
	MaxBlockDimY                     DeviceAttribute = 3
	MaxBlockDimZ                     DeviceAttribute = 4
	MaxGridDimX                      DeviceAttribute = 5
	MaxGridDimY                      DeviceAttribute = 6
	MaxGridDimZ                      DeviceAttribute = 7
	MaxSharedMemoryPerBlock          DeviceAttribute = 8
	TotalConstantMemory              DeviceAttribute = 9
	WarpSize                         DeviceAttribute = 10
	MaxRegistersPerBlock             DeviceAttribute = 12
	MultiprocessorCount              DeviceAttribute = 16
	Integrated                       DeviceAttribute = 18
	CanMapHostMemory                 DeviceAttribute = 19
	ComputeMode                      DeviceAttribute = 20
	ConcurrentKernels                DeviceAttribute = 31
	ECCEnabled                       DeviceAttribute = 32
	PCIBusID                         DeviceAttribute = 33
	PCIDeviceID                      DeviceAttribute = 34
	GlobalMemoryBusWidth             DeviceAttribute = 37
	L2CacheSize                      DeviceAttribute = 38
	MaxThreadsPerMultiprocessor      DeviceAttribute = 39
	AsyncEngineCount                 DeviceAttribute = 40
	UnifiedAddressing                DeviceAttribute = 41
	PCIDomainID                      DeviceAttribute = 50
	ComputeCapabilityMajor           DeviceAttribute = 75
	ComputeCapabilityMinor           DeviceAttribute = 76
	MaxSharedMemoryPerMultiprocessor DeviceAttribute = 81
	MaxRegistersPerMultiprocessor    DeviceAttribute = 82
	ManagedMemory                    DeviceAttribute = 83
	MaxSharedMemoryPerBlockOptin     DeviceAttribute = 97
	MaxBlocksPerMultiprocessor       DeviceAttribute = 106
)

// DeviceCount returns the number of CUDA devices the driver sees.
func DeviceCount() (int, error) {
	d, err := get()
	if err != nil {
		return 0, err
	}
	var n int32
	if err := d.call("cuDeviceGetCount", d.cuDeviceGetCount, uintptr(unsafe.Pointer(&n))); err != nil {
		return 0, err
	}
	return int(n), nil
}

// DeviceGet returns the handle of the device with the given ordinal
// (0 ≤ ordinal < DeviceCount).
func DeviceGet(ordinal int) (Device, error) {
	d, err := get()
	if err != nil {
		return 0, err
	}
	if ordinal < 0 {
		return 0, fmt.Errorf("cuDeviceGet: negative device ordinal %d", ordinal)
	}
	var dev int32
	if err := d.call("cuDeviceGet", d.cuDeviceGet, uintptr(unsafe.Pointer(&dev)), uintptr(ordinal)); err != nil {
		return 0, err
	}
	return Device(dev), nil
}

// Name returns the device's marketing name, e.g. "NVIDIA H200".
func (dv Device) Name() (string, error) {
	d, err := get()
	if err != nil {
		return "", err
	}
	buf := make([]byte, 256)
	if err := d.call("cuDeviceGetName", d.cuDeviceGetName, uintptr(unsafe.Pointer(&buf[0])), uintptr(len(buf)), uintptr(dv)); err != nil {
		return "", err
	}
	return goString(&buf[0]), nil
}

// Attribute returns one device property.
func (dv Device) Attribute(a DeviceAttribute) (int, error) {
	d, err := get()
	if err != nil {
		return 0, err
	}
	var v int32
	if err := d.call("cuDeviceGetAttribute", d.cuDeviceGetAttribute, uintptr(unsafe.Pointer(&v)), uintptr(a), uintptr(dv)); err != nil {
		return 0, err
	}
	return int(v), nil
}

// ComputeCapability returns the device's compute capability (9, 0 for H100).
func (dv Device) ComputeCapability() (major, minor int, err error) {
	if major, err = dv.Attribute(ComputeCapabilityMajor); err != nil {
		return 0, 0, err
	}
	if minor, err = dv.Attribute(ComputeCapabilityMinor); err != nil {
		return 0, 0, err
	}
	return major, minor, nil
}

// TotalMem returns the device's total memory in bytes.
func (dv Device) TotalMem() (uint64, error) {
	d, err := get()
	if err != nil {
		return 0, err
	}
	var n uint64
	if err := d.call("cuDeviceTotalMem", d.cuDeviceTotalMem, uintptr(unsafe.Pointer(&n)), uintptr(dv)); err != nil {
		return 0, err
	}
	return n, nil
}
