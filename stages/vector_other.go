//go:build !amd64

package stages

// Without the AVX2 kernels useVector stays false and these are never called.

func hasVector() bool { return false }

func mulLineU8(acc *uint32, c *uint8, n int, w uint32)      { panic("stages: no vector blur") }
func mulLineU16(acc *uint32, c *uint16, n int, w uint32)    { panic("stages: no vector blur") }
func addPairU8(acc *uint32, a, b *uint8, n int, w uint32)   { panic("stages: no vector blur") }
func grayRGB(dst, src *uint8, n int)                        { panic("stages: no vector grayscale") }
func addPairU16(acc *uint32, a, b *uint16, n int, w uint32) { panic("stages: no vector blur") }
