package cu

import "golang.org/x/sys/unix"

// adviseHuge asks for transparent huge pages for b; where they are off, b keeps small pages.
func adviseHuge(b []byte) { unix.Madvise(b, unix.MADV_HUGEPAGE) }

// physicalMemory is the machine's RAM in bytes (no request beyond it can be page-locked),
// or the largest value when the kernel does not say.
func physicalMemory() uint64 {
	var si unix.Sysinfo_t
	if unix.Sysinfo(&si) != nil || si.Totalram == 0 {
		return ^uint64(0)
	}
	return uint64(si.Totalram) * uint64(si.Unit)
}
