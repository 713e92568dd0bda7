package stages

import (
	"fmt"
	"image"
	"image/color"
)

// FromImage copies src into a new, tightly packed Image, so that pixels from the standard
// library (or anything that implements image.Image) can go through a pipeline. The result's
// origin is src.Bounds().Min: a sub-image (img.SubImage) gives just its rectangle.
//
// Gray sources (*image.Gray, *image.Gray16, and any image whose colour model is
// color.GrayModel or color.Gray16Model) give C = 1; every other image gives RGB, C = 3.
// The conversions are Decode's (docs/semantics.md#decode): alpha is dropped and the
// stored colour is kept, not premultiplied (*image.NRGBA keeps its R, G, B; the
// premultiplied *image.RGBA keeps its stored, already premultiplied, values); 16-bit
// samples become v>>8; palettes are expanded; YCbCr uses color.YCbCrToRGB's arithmetic and
// CMYK color.CMYKToRGB; other types go through color.NRGBAModel.
//
// An empty src gives a 0×0 image, which a run fails as "image is 0x0, want at least 1x1".
func FromImage(src image.Image) *Image {
	b := src.Bounds()
	if b.Empty() {
		return &Image{C: 3}
	}
	w, h := b.Dx(), b.Dy()
	if gray := grayRows(src); gray != nil {
		dst := NewImage(w, h, 1)
		for y := 0; y < h; y++ {
			gray(y, dst.Row(y))
		}
		return dst
	}
	if m, ok := src.(*image.NYCbCrA); ok {
		// Alpha dropped on every path: rowConverter's generic one (taken for a negative
		// origin) would un-premultiply it through color.NRGBAModel.
		src = &m.YCbCr
	}
	dst := NewImage(w, h, 3)
	conv := rowConverter(src) // decode's conversions, row by row from b.Min
	for y := 0; y < h; y++ {
		conv(y, dst.Row(y))
	}
	return dst
}

// grayRows returns a loop that writes row sy (counted from the top of src's bounds) of a
// gray source as one byte a pixel into out, or nil when src is not gray.
func grayRows(src image.Image) rowFunc {
	switch m := src.(type) {
	case *image.Gray:
		return func(sy int, out []byte) { copy(out, m.Pix[sy*m.Stride:][:len(out)]) }
	case *image.Gray16:
		return func(sy int, out []byte) {
			in := m.Pix[sy*m.Stride:][:2*len(out)]
			for x := range out {
				out[x] = in[2*x] // big-endian: the high byte is v>>8
			}
		}
	}
	b := src.Bounds()
	switch src.ColorModel() {
	case color.GrayModel:
		return func(sy int, out []byte) {
			for x := range out {
				out[x] = color.GrayModel.Convert(src.At(b.Min.X+x, b.Min.Y+sy)).(color.Gray).Y
			}
		}
	case color.Gray16Model:
		return func(sy int, out []byte) {
			for x := range out {
				out[x] = byte(color.Gray16Model.Convert(src.At(b.Min.X+x, b.Min.Y+sy)).(color.Gray16).Y >> 8)
			}
		}
	}
	return nil
}

// ToImage copies m into a new standard-library image with bounds (0, 0)-(W, H): an
// *image.Gray for a gray image (C = 1) and an opaque *image.RGBA (A = 255) for an RGB one
// (C = 3). Being a copy, it stays valid whatever becomes of m's memory. It panics when m
// fails Check.
func (m *Image) ToImage() image.Image {
	if err := m.Check(); err != nil {
		panic(fmt.Sprintf("stages: ToImage: %v", err))
	}
	r := image.Rect(0, 0, m.W, m.H)
	if m.C == 1 {
		g := image.NewGray(r)
		for y := 0; y < m.H; y++ {
			copy(g.Pix[y*g.Stride:][:m.W], m.Row(y))
		}
		return g
	}
	c := image.NewRGBA(r)
	for y := 0; y < m.H; y++ {
		in, out := m.Row(y), c.Pix[y*c.Stride:][:4*m.W]
		for x := 0; x < m.W; x++ {
			o := out[4*x : 4*x+4 : 4*x+4]
			o[0], o[1], o[2], o[3] = in[3*x], in[3*x+1], in[3*x+2], 255
		}
	}
	return c
}
