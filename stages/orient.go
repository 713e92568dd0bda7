package stages

import (
	"fmt"
	"image"
)

// Orient writes src, as stored in the file, into dst turned by EXIF orientation o (1 to
// 8, with the meaning Decode gives it): what Decode does after decoding a JPEG whose
// header says o. A device decoder that decodes the stored pixels uses it as its
// reference, so the device and the CPU path agree on every orientation. src and dst are
// RGB; dst is src's size, with W and H swapped for o from 5 to 8.
func Orient(dst, src *Image, o int) error {
	want := Shape{W: src.W, H: src.H, C: 3}
	if o >= 5 {
		want.W, want.H = src.H, src.W
	}
	switch {
	case o < 1 || o > 8:
		return fmt.Errorf("orientation %d, want 1 to 8", o)
	case src.C != 3 || dst.Shape() != want:
		return fmt.Errorf("orientation %d of a %v image into %v, want RGB into %v", o, src.Shape(), dst.Shape(), want)
	}
	canvas := image.Pt(src.W, src.H)
	n := src.W * 3
	for y := 0; y < src.H; y++ {
		row := src.Row(y)
		// The same lines as paint: one owner of what an orientation means.
		start, step := orientLine(dst.Stride, o, canvas, 0, y)
		for i := 0; i < n; i += 3 {
			d := dst.Pix[start : start+3 : start+3]
			d[0], d[1], d[2] = row[i], row[i+1], row[i+2]
			start += step
		}
	}
	return nil
}
