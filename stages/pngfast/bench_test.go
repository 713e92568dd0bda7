package pngfast

import (
	"fmt"
	"math/rand"
	"testing"
)

// BenchmarkEncode reports megapixels per second and the compressed size
// relative to the raw pixels, on the sample photos (or the JPEG that
// IMGPIPE_BENCH_PHOTO names), gray and RGB, and on 1920×1080 random pixels
// (incompressible: the worst case for the bit writer).
func BenchmarkEncode(b *testing.B) {
	gray, rgb := photos(b)
	rng := rand.New(rand.NewSource(1))
	inputs := []struct {
		name   string
		images []img
	}{
		{"photo/gray", gray},
		{"photo/rgb", rgb},
		{"random/gray", []img{randomImg(rng, 1920, 1080, 1, 0)}},
		{"random/rgb", []img{randomImg(rng, 1920, 1080, 3, 0)}},
	}
	for _, in := range inputs {
		b.Run(in.name, func(b *testing.B) {
			pixels, raw, size := 0, 0, 0
			var dst []byte
			for _, m := range in.images {
				pixels += m.w * m.h
				raw += m.w * m.h * m.c
				dst = make([]byte, max(len(dst), Bound(m.w, m.h, m.c)))
			}
			b.SetBytes(int64(raw))
			for b.Loop() {
				size = 0
				for _, m := range in.images {
					size += Encode(dst, m.pix, m.w, m.h, m.c, m.stride)
				}
			}
			b.ReportMetric(float64(pixels)*float64(b.N)/1e6/b.Elapsed().Seconds(), "MP/s")
			b.ReportMetric(float64(size)/float64(raw), "ratio")
		})
	}
}

func ExampleAppend() {
	// A 3×2 gray image: two rows of three pixels.
	pix := []byte{0, 128, 255, 10, 20, 30}
	file := Append(nil, pix, 3, 2, 1, 3)
	fmt.Println(len(file) <= Bound(3, 2, 1), string(file[1:4]))
	// Output: true PNG
}
