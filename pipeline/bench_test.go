package pipeline

import (
	"context"
	"fmt"
	"io"
	"math/rand"
	"os"
	"path/filepath"
	"testing"

	"github.com/imgpipe/imgpipe/stages"
)

// photoLike returns a w×h RGB image with smooth gradients, edges and sensor-like noise: JPEG
// compresses it like a photo, unlike pure noise (pathologically large files) or flat colour.
func photoLike(rng *rand.Rand, w, h int) *stages.Image {
	m := stages.NewImage(w, h, 3)
	cx, cy := rng.Intn(w), rng.Intn(h)
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			p := m.Pix[y*m.Stride+3*x:]
			d := (x-cx)*(x-cx) + (y-cy)*(y-cy)
			base := 60 + 120*x/w
			if d < w*h/8 {
				base += 50
			}
			for c := 0; c < 3; c++ {
				v := base + c*20*y/h + rng.Intn(24) - 12
				p[c] = byte(min(max(v, 0), 255))
			}
		}
	}
	return m
}

// BenchmarkChainFolder runs the reference chain over a folder of 1080p JPEGs, end to end:
// read, decode, grayscale, blur σ1.5, transpose, histogram, PNG encode, atomic write, report.
// IMGPIPE_BENCH_PHOTOS names a folder of real photos to use instead (bench/photos/fetch.sh
// makes one); profile with -cpuprofile.
func BenchmarkChainFolder(b *testing.B) {
	n, w, h := 8, 1920, 1080
	in := b.TempDir()
	if dir := os.Getenv("IMGPIPE_BENCH_PHOTOS"); dir != "" {
		in, n, w, h = dir, 0, 0, 0
	}
	rng := rand.New(rand.NewSource(42))
	for i := 0; i < n; i++ {
		f, err := os.Create(filepath.Join(in, fmt.Sprintf("photo%02d.jpg", i)))
		if err != nil {
			b.Fatal(err)
		}
		if err := stages.Encode(f, photoLike(rng, w, h), stages.SaveOptions{Format: "jpeg", Quality: 90}); err != nil {
			b.Fatal(err)
		}
		f.Close()
	}
	out := b.TempDir()
	plan := compileWith(b, Builtin, "decode | grayscale | blur sigma=1.5 | transpose | histogram | save format=png")
	b.ResetTimer()
	var images int
	var mp float64
	for i := 0; i < b.N; i++ {
		sum, err := Run(context.Background(), plan, Folder(in, out), ToFolder(out), Options{Report: io.Discard})
		if err != nil || sum.Failed != 0 || (n > 0 && sum.OK != n) {
			b.Fatalf("%+v %v", sum, err)
		}
		images += sum.OK
		mp += sum.Megapixels
	}
	sec := b.Elapsed().Seconds()
	b.ReportMetric(float64(images)/sec, "img/s")
	b.ReportMetric(mp/sec, "MP/s")
}
