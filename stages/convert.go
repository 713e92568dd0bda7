package stages

import (
	"image"
	"image/color"
)

// rowFunc writes row sy (counted from the top of the decoded image's bounds)
// as packed RGB into out, which holds exactly Dx()*3 bytes.
type rowFunc func(sy int, out []byte)

// paint converts src into dst under EXIF orientation o. canvas is the stored
// (pre-orientation) size; src's bounds lie inside it. Each source row lands
// on a straight line of dst: a row (orientations 1..4) or a column (5..8).
// Orientation 1 converts straight into dst's rows; the others convert a row
// into a scratch row and then scatter it.
func paint(dst *Image, src image.Image, o int, canvas image.Point) {
	b := src.Bounds()
	conv := rowConverter(src)
	n := b.Dx() * 3
	if o == 1 {
		for sy := 0; sy < b.Dy(); sy++ {
			off := (b.Min.Y+sy)*dst.Stride + b.Min.X*3
			conv(sy, dst.Pix[off:off+n])
		}
		return
	}
	tmp := make([]byte, n)
	for sy := 0; sy < b.Dy(); sy++ {
		conv(sy, tmp)
		start, step := orientLine(dst.Stride, o, canvas, b.Min.X, b.Min.Y+sy)
		p := dst.Pix
		for i := 0; i < n; i += 3 {
			d := p[start : start+3 : start+3]
			d[0], d[1], d[2] = tmp[i], tmp[i+1], tmp[i+2]
			start += step
		}
	}
}

// orientLine returns where stored pixel (x, y) of a cw×ch canvas lands in
// the oriented destination (a byte offset), and the offset step from one
// stored pixel to the next one to its right. Orientations follow EXIF:
// 2 mirrors, 3 turns 180°, 4 flips, 5 transposes, 6 turns 90° clockwise,
// 7 transverses, 8 turns 90° counter-clockwise.
func orientLine(stride, o int, canvas image.Point, x, y int) (start, step int) {
	cw, ch := canvas.X, canvas.Y
	var dx, dy, sx, sy int // destination of (x, y) and its step per x
	switch o {
	case 2:
		dx, dy, sx = cw-1-x, y, -1
	case 3:
		dx, dy, sx = cw-1-x, ch-1-y, -1
	case 4:
		dx, dy, sx = x, ch-1-y, 1
	case 5:
		dx, dy, sy = y, x, 1
	case 6:
		dx, dy, sy = ch-1-y, x, 1
	case 7:
		dx, dy, sy = ch-1-y, cw-1-x, -1
	case 8:
		dx, dy, sy = y, cw-1-x, -1
	default:
		dx, dy, sx = x, y, 1
	}
	return dy*stride + dx*3, sy*stride + sx*3
}

// rowConverter picks a conversion loop for src's concrete type, falling back
// to the colour model for types no supported decoder returns today.
func rowConverter(src image.Image) rowFunc {
	switch m := src.(type) {
	case *image.YCbCr:
		if f := yCbCrRows(m); f != nil {
			return f
		}
	case *image.NYCbCrA: // lossy WebP with alpha: drop A
		if f := yCbCrRows(&m.YCbCr); f != nil {
			return f
		}
	case *image.Gray:
		return func(sy int, out []byte) {
			in := m.Pix[sy*m.Stride:][:len(out)/3]
			for x, v := range in {
				o := out[3*x : 3*x+3 : 3*x+3]
				o[0], o[1], o[2] = v, v, v
			}
		}
	case *image.Gray16:
		return func(sy int, out []byte) {
			in := m.Pix[sy*m.Stride:][:len(out)/3*2]
			for x := 0; x < len(out)/3; x++ {
				v := in[2*x] // big-endian: the high byte is v>>8
				o := out[3*x : 3*x+3 : 3*x+3]
				o[0], o[1], o[2] = v, v, v
			}
		}
	case *image.RGBA:
		return rgbaRows(m.Pix, m.Stride, 4)
	case *image.NRGBA:
		return rgbaRows(m.Pix, m.Stride, 4)
	case *image.RGBA64:
		return rgbaRows(m.Pix, m.Stride, 8)
	case *image.NRGBA64:
		return rgbaRows(m.Pix, m.Stride, 8)
	case *image.CMYK:
		return func(sy int, out []byte) {
			in := m.Pix[sy*m.Stride:][:len(out)/3*4]
			for x := 0; x < len(out)/3; x++ {
				i := in[4*x : 4*x+4 : 4*x+4]
				o := out[3*x : 3*x+3 : 3*x+3]
				o[0], o[1], o[2] = color.CMYKToRGB(i[0], i[1], i[2], i[3])
			}
		}
	case *image.Paletted:
		lut := paletteRGB(m.Palette)
		return func(sy int, out []byte) {
			in := m.Pix[sy*m.Stride:][:len(out)/3]
			for x, v := range in {
				c := &lut[v]
				o := out[3*x : 3*x+3 : 3*x+3]
				o[0], o[1], o[2] = c[0], c[1], c[2]
			}
		}
	}
	b := src.Bounds()
	return func(sy int, out []byte) {
		for x := 0; x < len(out)/3; x++ {
			c := color.NRGBAModel.Convert(src.At(b.Min.X+x, b.Min.Y+sy)).(color.NRGBA)
			out[3*x], out[3*x+1], out[3*x+2] = c.R, c.G, c.B
		}
	}
}

// rgbaRows converts the RGBA family: 8-bit (bpp 4) or 16-bit big-endian
// (bpp 8, whose high bytes sit at 0, 2 and 4). The stored colour bytes are
// kept and alpha is dropped.
func rgbaRows(pix []byte, stride, bpp int) rowFunc {
	hi := bpp / 4 // distance between the R, G and B bytes we keep
	return func(sy int, out []byte) {
		w := len(out) / 3
		in := pix[sy*stride:][:w*bpp]
		for x := 0; x < w; x++ {
			i := in[x*bpp : x*bpp+bpp : x*bpp+bpp]
			o := out[3*x : 3*x+3 : 3*x+3]
			o[0], o[1], o[2] = i[0], i[hi], i[2*hi]
		}
	}
}

// paletteRGB expands a palette into a 256-entry table. Entries past the
// palette's end are black, so an out-of-range index cannot panic.
// color.RGBA and color.NRGBA entries keep their stored R, G, B (the PNG
// decoder stores tRNS palettes as NRGBA); other colour types go through the
// non-premultiplied model.
func paletteRGB(p color.Palette) *[256][3]byte {
	var lut [256][3]byte
	for i, c := range p {
		if i == 256 {
			break
		}
		switch c := c.(type) {
		case nil:
		case color.RGBA:
			lut[i] = [3]byte{c.R, c.G, c.B}
		case color.NRGBA:
			lut[i] = [3]byte{c.R, c.G, c.B}
		default:
			n := color.NRGBAModel.Convert(c).(color.NRGBA)
			lut[i] = [3]byte{n.R, n.G, n.B}
		}
	}
	return &lut
}

// yCbCrRows returns the conversion loop for m's subsample ratio, or nil for
// layouts it does not know (the caller then uses the generic path).
func yCbCrRows(m *image.YCbCr) rowFunc {
	var hs, vs uint // chroma is subsampled by 1<<hs across and 1<<vs down
	switch m.SubsampleRatio {
	case image.YCbCrSubsampleRatio444:
	case image.YCbCrSubsampleRatio422:
		hs = 1
	case image.YCbCrSubsampleRatio420:
		hs, vs = 1, 1
	case image.YCbCrSubsampleRatio440:
		vs = 1
	case image.YCbCrSubsampleRatio411:
		hs = 2
	case image.YCbCrSubsampleRatio410:
		hs, vs = 2, 1
	default:
		return nil
	}
	minX, minY := m.Rect.Min.X, m.Rect.Min.Y
	if minX < 0 || minY < 0 {
		// image.YCbCr divides coordinates with '/', which differs from our
		// shifts for negatives; no decoder produces these.
		return nil
	}
	return func(sy int, out []byte) {
		w := len(out) / 3
		yrow := m.Y[sy*m.YStride:][:w]
		// The same chroma offsets as (*image.YCbCr).COffset.
		ci := (((minY + sy) >> vs) - (minY >> vs)) * m.CStride
		cx0 := minX >> hs
		cw := ((minX + w - 1) >> hs) - cx0 + 1
		cb := m.Cb[ci:][:cw]
		cr := m.Cr[ci:][:cw]
		for x, yy := range yrow {
			c := ((minX + x) >> hs) - cx0
			// color.YCbCrToRGB's arithmetic, written out here because the
			// function itself is over the inlining budget.
			yy1 := int32(yy) * 0x10101
			cb1 := int32(cb[c]) - 128
			cr1 := int32(cr[c]) - 128
			o := out[3*x : 3*x+3 : 3*x+3]
			o[0] = clampYCC(yy1 + 91881*cr1)
			o[1] = clampYCC(yy1 - 22554*cb1 - 46802*cr1)
			o[2] = clampYCC(yy1 + 116130*cb1)
		}
	}
}

// clampYCC finishes one channel of color.YCbCrToRGB: v is the 16.16 fixed
// point value, clamped to 0..255 with the library's bit trick.
func clampYCC(v int32) uint8 {
	if uint32(v)&0xff000000 == 0 {
		return uint8(v >> 16)
	}
	return uint8(^(v >> 31))
}
