package stages

import (
	"bytes"
	"fmt"
	"image"
	"image/jpeg"
	"image/png"
	"io"
	"math/rand"
	"testing"
)

// Benchmarks run on 1920x1080 random images (never zeros) and report
// megapixels per second of input. Decode and encode are also run on a
// photo-like image, since random noise is the worst case for a codec.

const benchW, benchH = 1920, 1080

func benchImage(c int) *Image { return randImage(rand.New(rand.NewSource(42)), benchW, benchH, c, 0) }

func reportMPs(b *testing.B, pixels int) {
	b.ReportMetric(float64(pixels)*float64(b.N)/1e6/b.Elapsed().Seconds(), "MP/s")
}

func BenchmarkGrayscale(b *testing.B) {
	src, dst := benchImage(3), NewImage(benchW, benchH, 1)
	b.SetBytes(int64(src.Len()))
	for b.Loop() {
		Grayscale(dst, src)
	}
	reportMPs(b, benchW*benchH)
}

func BenchmarkBlur(b *testing.B) {
	for _, c := range []int{1, 3} {
		for _, sigma := range []float64{0.8, 1.5, 3, 8, 32} {
			b.Run(fmt.Sprintf("c%d/sigma%v", c, sigma), func(b *testing.B) {
				src, dst, taps := benchImage(c), NewImage(benchW, benchH, c), BlurTaps(sigma)
				b.SetBytes(int64(src.Len()))
				for b.Loop() {
					Blur(dst, src, taps)
				}
				reportMPs(b, benchW*benchH)
			})
		}
	}
}

func BenchmarkBoxBlur(b *testing.B) {
	for _, c := range []int{1, 3} {
		for _, r := range []int{1, 5, 15} {
			b.Run(fmt.Sprintf("c%d/r%d", c, r), func(b *testing.B) {
				src, dst := benchImage(c), NewImage(benchW, benchH, c)
				b.SetBytes(int64(src.Len()))
				for b.Loop() {
					BoxBlur(dst, src, r)
				}
				reportMPs(b, benchW*benchH)
			})
		}
	}
}

func BenchmarkTranspose(b *testing.B) {
	for _, c := range []int{1, 3} {
		b.Run(fmt.Sprintf("c%d", c), func(b *testing.B) {
			src, dst := benchImage(c), NewImage(benchH, benchW, c)
			b.SetBytes(int64(src.Len()))
			for b.Loop() {
				Transpose(dst, src)
			}
			reportMPs(b, benchW*benchH)
		})
	}
}

func BenchmarkHistogram(b *testing.B) {
	for _, c := range []int{1, 3} {
		b.Run(fmt.Sprintf("c%d", c), func(b *testing.B) {
			src := benchImage(c)
			var h [256]uint64
			b.SetBytes(int64(src.Len()))
			for b.Loop() {
				Histogram(&h, src)
			}
			reportMPs(b, benchW*benchH)
		})
	}
}

// benchInputs are a random and a photo-like 1080p RGB image.
func benchInputs() map[string]*Image {
	rng := rand.New(rand.NewSource(42))
	return map[string]*Image{
		"random": randImage(rng, benchW, benchH, 3, 0),
		"smooth": smoothImage(rng, benchW, benchH, 3, 0),
	}
}

func BenchmarkDecodeJPEG(b *testing.B) {
	for name, src := range benchInputs() {
		var buf bytes.Buffer
		if err := Encode(&buf, src, SaveOptions{Format: "jpeg", Quality: 90}); err != nil {
			b.Fatal(err)
		}
		data := buf.Bytes()
		b.Run(name, func(b *testing.B) {
			dst := NewImage(benchW, benchH, 3)
			alloc := func(w, h, c int) (*Image, error) { return dst, nil }
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				if _, err := Decode(data, DecodeOptions{}, alloc); err != nil {
					b.Fatal(err)
				}
			}
			reportMPs(b, benchW*benchH)
		})
		// The conversion alone, from the standard decoder's YCbCr.
		b.Run(name+"/convert", func(b *testing.B) {
			m, err := jpeg.Decode(bytes.NewReader(data))
			if err != nil {
				b.Fatal(err)
			}
			dst := NewImage(benchW, benchH, 3)
			for b.Loop() {
				paint(dst, m, 1, image.Pt(benchW, benchH))
			}
			reportMPs(b, benchW*benchH)
		})
	}
}

func BenchmarkEncodePNG(b *testing.B) {
	for name, src := range benchInputs() {
		for _, level := range []int{PNGDefault, 6} {
			b.Run(fmt.Sprintf("%s/level%d", name, level), func(b *testing.B) {
				var n int64
				for b.Loop() {
					cw := &countWriter{}
					if err := Encode(cw, src, SaveOptions{Compression: level}); err != nil {
						b.Fatal(err)
					}
					n = cw.n
				}
				b.ReportMetric(float64(n)/float64(src.Len()), "ratio")
				reportMPs(b, benchW*benchH)
			})
		}
		// image/png at BestSpeed on the RGBA copy it needs, for comparison.
		b.Run(name+"/image-png-bestspeed", func(b *testing.B) {
			enc := &png.Encoder{CompressionLevel: png.BestSpeed}
			var n int64
			for b.Loop() {
				rgba := toRGBA(src)
				cw := &countWriter{}
				if err := enc.Encode(cw, rgba); err != nil {
					b.Fatal(err)
				}
				n = cw.n
			}
			b.ReportMetric(float64(n)/float64(src.Len()), "ratio")
			reportMPs(b, benchW*benchH)
		})
	}
}

func BenchmarkEncodeJPEG(b *testing.B) {
	for name, src := range benchInputs() {
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				if err := Encode(io.Discard, src, SaveOptions{Format: "jpeg"}); err != nil {
					b.Fatal(err)
				}
			}
			reportMPs(b, benchW*benchH)
		})
	}
}

type countWriter struct{ n int64 }

func (c *countWriter) Write(p []byte) (int, error) { c.n += int64(len(p)); return len(p), nil }

func toRGBA(m *Image) *image.RGBA {
	out := image.NewRGBA(image.Rect(0, 0, m.W, m.H))
	for y := 0; y < m.H; y++ {
		in, o := m.Row(y), out.Pix[y*out.Stride:]
		for x := 0; x < m.W; x++ {
			o[4*x], o[4*x+1], o[4*x+2], o[4*x+3] = in[3*x], in[3*x+1], in[3*x+2], 255
		}
	}
	return out
}
