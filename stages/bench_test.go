package stages

import (
	"bytes"
	"errors"
	"fmt"
	"image"
	"image/jpeg"
	"image/png"
	"io"
	"math/rand"
	"os"
	"testing"

	"golang.org/x/sync/errgroup"
)

// Benchmarks run on 1920x1080 random images (never zeros) and report
// megapixels per second of input. Decode and encode are also run on a
// smooth synthetic image, since random noise is the worst case for a codec,
// and on a real photo when IMGPIPE_BENCH_PHOTO names a JPEG file (its
// top-left 1920x1080, or the whole of a smaller one; the decode benchmark
// also decodes the file itself). No photo is committed with the tests.

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

// benchInputs are a random and a smooth 1080p RGB image, and the photo
// named by IMGPIPE_BENCH_PHOTO if there is one.
func benchInputs(b *testing.B) map[string]*Image {
	rng := rand.New(rand.NewSource(42))
	in := map[string]*Image{
		"random": randImage(rng, benchW, benchH, 3, 0),
		"smooth": smoothImage(rng, benchW, benchH, 3, 0),
	}
	if data := benchPhoto(b); data != nil {
		m, err := Decode(data, DecodeOptions{Orient: true}, nil)
		if err != nil {
			b.Fatal(err)
		}
		crop := NewImage(min(m.W, benchW), min(m.H, benchH), 3)
		for y := 0; y < crop.H; y++ {
			copy(crop.Row(y), m.Row(y))
		}
		in["photo"] = crop
	}
	return in
}

// benchPhoto returns the file IMGPIPE_BENCH_PHOTO names, or nil.
func benchPhoto(b *testing.B) []byte {
	path := os.Getenv("IMGPIPE_BENCH_PHOTO")
	if path == "" {
		return nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		b.Fatal(err)
	}
	return data
}

func BenchmarkDecodeJPEG(b *testing.B) {
	for name, src := range benchInputs(b) {
		var buf bytes.Buffer
		if err := Encode(&buf, src, SaveOptions{Format: "jpeg", Quality: 90}); err != nil {
			b.Fatal(err)
		}
		data := buf.Bytes()
		b.Run(name, func(b *testing.B) {
			dst := NewImage(src.W, src.H, 3)
			alloc := func(w, h, c int) (*Image, error) { return dst, nil }
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				if _, err := Decode(data, DecodeOptions{}, alloc); err != nil {
					b.Fatal(err)
				}
			}
			reportMPs(b, src.W*src.H)
		})
		// The conversion alone, from the standard decoder's YCbCr.
		b.Run(name+"/convert", func(b *testing.B) {
			m, err := jpeg.Decode(bytes.NewReader(data))
			if err != nil {
				b.Fatal(err)
			}
			dst := NewImage(src.W, src.H, 3)
			for b.Loop() {
				paint(dst, m, 1, image.Pt(src.W, src.H))
			}
			reportMPs(b, src.W*src.H)
		})
	}
	if data := benchPhoto(b); data != nil {
		b.Run("photo-file", func(b *testing.B) {
			hd, err := DecodeHeader(data, DecodeOptions{})
			if err != nil {
				b.Fatal(err)
			}
			dst := NewImage(hd.W, hd.H, 3)
			alloc := func(w, h, c int) (*Image, error) { return dst, nil }
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				if _, err := Decode(data, DecodeOptions{}, alloc); err != nil {
					b.Fatal(err)
				}
			}
			reportMPs(b, hd.W*hd.H)
		})
	}
}

func BenchmarkEncodePNG(b *testing.B) {
	for name, src := range benchInputs(b) {
		for _, level := range []int{PNGFast, 1, 6} {
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
				reportMPs(b, src.W*src.H)
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
			reportMPs(b, src.W*src.H)
		})
	}
}

func BenchmarkEncodeJPEG(b *testing.B) {
	for name, src := range benchInputs(b) {
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				if err := Encode(io.Discard, src, SaveOptions{Format: "jpeg"}); err != nil {
					b.Fatal(err)
				}
			}
			reportMPs(b, src.W*src.H)
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

// BenchmarkOutputWrites writes groups of 64 outputs of 700 kB (a blurred 2.6 MP gray PNG)
// atomically: one by one (WriteFileAtomicIn: two syncs per file), or staged then committed
// as a group (one sync of the file system for the group), which is how a run writes them.
// Set IMGPIPE_BENCH_DIR to measure a given disk (the default temporary folder may be
// tmpfs, where syncs cost nothing).
func BenchmarkOutputWrites(b *testing.B) {
	data := make([]byte, 700<<10)
	for i := range data {
		data[i] = byte(i * 7)
	}
	write := func(w io.Writer) error { _, err := w.Write(data); return err }
	const group = 64
	for _, mode := range []string{"one-by-one", "group"} {
		b.Run(mode, func(b *testing.B) {
			dir, err := os.MkdirTemp(os.Getenv("IMGPIPE_BENCH_DIR"), "imgpipe-bench-writes-")
			if err != nil {
				b.Fatal(err)
			}
			defer os.RemoveAll(dir)
			root, err := os.OpenRoot(dir)
			if err != nil {
				b.Fatal(err)
			}
			defer root.Close()
			b.SetBytes(group * int64(len(data)))
			for i := 0; b.Loop(); i++ {
				names := make([]string, group)
				for j := range names {
					names[j] = fmt.Sprintf("%d-%d.png", i, j)
				}
				var g errgroup.Group
				g.SetLimit(16)
				staged := make([]Staged, group)
				for j, name := range names {
					g.Go(func() error {
						if mode == "one-by-one" {
							return WriteFileAtomicIn(root, name, write)
						}
						s, err := StageIn(root, name, write)
						staged[j] = s
						return err
					})
				}
				if err := g.Wait(); err != nil {
					b.Fatal(err)
				}
				if mode == "group" {
					if err := errors.Join(CommitIn(root, staged)...); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(float64(b.N*group)/b.Elapsed().Seconds(), "files/s")
		})
	}
}

// BenchmarkResize covers the thumbnail job's two shapes of work (a 1/8-scaled
// decode, and a full-size 1080p frame, to 256 pixels wide) and a halving; MP/s
// counts input pixels.
func BenchmarkResize(b *testing.B) {
	cases := []struct {
		name         string
		w, h, ow, oh int
		c            int
		f            Filter
	}{
		{"thumb-from-eighth-lanczos3", 316, 210, 256, 170, 3, FilterLanczos3},
		{"thumb-lanczos3", benchW, benchH, 256, 144, 3, FilterLanczos3},
		{"thumb-lanczos3-gray", benchW, benchH, 256, 144, 1, FilterLanczos3},
		{"thumb-area", benchW, benchH, 256, 144, 3, FilterArea},
		{"half-linear", benchW, benchH, benchW / 2, benchH / 2, 3, FilterLinear},
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			src := randImage(rand.New(rand.NewSource(42)), tc.w, tc.h, tc.c, 0)
			spec := ResizeSpec{Width: tc.ow, Height: tc.oh, Fit: FitExact, Filter: tc.f}
			dst := NewImage(tc.ow, tc.oh, tc.c)
			b.SetBytes(int64(src.Len()))
			for b.Loop() {
				Resize(dst, src, spec)
			}
			reportMPs(b, tc.w*tc.h)
		})
	}
}
