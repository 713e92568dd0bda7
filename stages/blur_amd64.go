package stages

import "golang.org/x/sys/cpu"

// The AVX2 sweeps of blur_amd64.s; n is a positive multiple of 8 and the
// pointers address at least n elements.

//go:noescape
func mulLineU8(acc *uint32, c *uint8, n int, w uint32)

//go:noescape
func mulLineU16(acc *uint32, c *uint16, n int, w uint32)

//go:noescape
func addPairU8(acc *uint32, a, b *uint8, n int, w uint32)

//go:noescape
func addPairU16(acc *uint32, a, b *uint16, n int, w uint32)

// hasVector reports whether the CPU runs the AVX2 kernels.
func hasVector() bool { return cpu.X86.HasAVX2 }
