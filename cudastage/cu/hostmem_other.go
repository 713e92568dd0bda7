//go:build !linux

package cu

// adviseHuge does nothing: transparent huge pages are Linux's.
func adviseHuge([]byte) {}

// physicalMemory does not limit requests where the kernel is not Linux.
func physicalMemory() uint64 { return ^uint64(0) }
