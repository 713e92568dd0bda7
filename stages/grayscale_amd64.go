package stages

// grayRGB is the vector grayscale of grayscale_amd64.s: n pixels, n a
// positive multiple of 16, 3n bytes of src, n of dst.
//
//go:noescape
func grayRGB(dst, src *uint8, n int)
