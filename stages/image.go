package stages

import "fmt"

// Image is an 8-bit interleaved image: C = 1 (gray) or C = 3 (RGB).
//
// Row y starts at Pix[y*Stride] and holds W*C bytes; Stride may be larger
// than W*C. Pix may live anywhere, including page-locked memory owned by a
// GPU buffer pool, so stages never assume it came from the Go heap.
type Image struct {
	W, H   int
	C      int
	Stride int
	Pix    []byte
}

// NewImage returns a zeroed, tightly packed w×h image with c channels.
func NewImage(w, h, c int) *Image {
	return &Image{W: w, H: h, C: c, Stride: w * c, Pix: make([]byte, w*h*c)}
}

// Row returns the W*C pixel bytes of row y, without the stride padding.
func (m *Image) Row(y int) []byte {
	o := y * m.Stride
	return m.Pix[o : o+m.W*m.C]
}

// Len is the number of pixel bytes W*H*C, not counting stride padding.
func (m *Image) Len() int { return m.W * m.H * m.C }

// Check reports whether the image's fields are consistent.
func (m *Image) Check() error {
	switch {
	case m.C != 1 && m.C != 3:
		return fmt.Errorf("image has %d channels, want 1 or 3", m.C)
	case m.W < 1 || m.H < 1:
		return fmt.Errorf("image is %dx%d, want at least 1x1", m.W, m.H)
	case m.Stride < m.W*m.C:
		return fmt.Errorf("image stride %d is less than width×channels %d", m.Stride, m.W*m.C)
	case len(m.Pix) < (m.H-1)*m.Stride+m.W*m.C:
		return fmt.Errorf("image buffer holds %d bytes, need %d", len(m.Pix), (m.H-1)*m.Stride+m.W*m.C)
	}
	return nil
}

// Shape is the geometry of an image: width and height in pixels and channels (1 or 3). It is
// the one geometry type of every layer: stages, the planner, the scheduler and the kernels.
type Shape struct {
	W, H, C int
}

// Bytes is W·H·C, the size of the image packed without row padding.
func (s Shape) Bytes() int { return s.W * s.H * s.C }

// String formats the shape as WxHxC.
func (s Shape) String() string { return fmt.Sprintf("%dx%dx%d", s.W, s.H, s.C) }

// Shape returns m's geometry.
func (m *Image) Shape() Shape { return Shape{W: m.W, H: m.H, C: m.C} }
