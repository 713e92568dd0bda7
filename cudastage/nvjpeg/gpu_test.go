package nvjpeg_test

import (
	"bytes"
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/imgpipe/imgpipe/cudastage"
	"github.com/imgpipe/imgpipe/cudastage/cu"
	"github.com/imgpipe/imgpipe/cudastage/cutest"
	"github.com/imgpipe/imgpipe/cudastage/nvjpeg"
)

// openGPU opens the test GPU and skips when nvJPEG is missing (a GPU machine
// without it still runs the rest of the suite; IMGPIPE_REQUIRE_GPU=1 makes
// that a failure).
func openGPU(t testing.TB) *cudastage.GPU {
	t.Helper()
	g, err := cudastage.OpenGPU(cutest.Require(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	if err := nvjpeg.Load(); err != nil {
		if cutest.Required() {
			t.Fatalf("nvJPEG required on the GPU machine: %v", err)
		}
		t.Skip(err)
	}
	return g
}

// photo draws a photo-like w×h picture: smooth gradients, soft shapes and
// sensor-like noise, so that JPEG has both flat and busy areas to code.
func photo(w, h, c int, seed uint64) *image.RGBA {
	r := rand.New(rand.NewPCG(seed, 7))
	m := image.NewRGBA(image.Rect(0, 0, w, h))
	cx, cy := float64(w)*r.Float64(), float64(h)*r.Float64()
	for y := range h {
		for x := range w {
			d := math.Hypot(float64(x)-cx, float64(y)-cy) / float64(max(w, h))
			v := [3]float64{
				128 + 100*math.Sin(float64(x)/37+d*6),
				128 + 90*math.Cos(float64(y)/23-d*4),
				128 + 80*math.Sin(float64(x+y)/51),
			}
			var px [3]uint8
			for i := range v {
				px[i] = uint8(max(0, min(255, v[i]+r.NormFloat64()*6)))
			}
			if c == 1 {
				px[1], px[2] = px[0], px[0]
			}
			m.SetRGBA(x, y, color.RGBA{px[0], px[1], px[2], 255})
		}
	}
	return m
}

// packed returns m's pixels as c-channel rows.
func packed(m *image.RGBA, c int) []byte {
	b := m.Bounds()
	out := make([]byte, 0, b.Dx()*b.Dy()*c)
	for i := 0; i < len(m.Pix); i += 4 {
		out = append(out, m.Pix[i:i+c]...)
	}
	return out
}

// psnr decodes file with Go's decoder and compares it with the c-channel
// source, in dB.
func psnr(t *testing.T, file, src []byte, w, h, c int) float64 {
	t.Helper()
	m, err := jpeg.Decode(bytes.NewReader(file))
	if err != nil {
		t.Fatal(err)
	}
	if m.Bounds().Dx() != w || m.Bounds().Dy() != h {
		t.Fatalf("decoded %v, want %dx%d", m.Bounds(), w, h)
	}
	var se float64
	for y := range h {
		for x := range w {
			r, g, b, _ := m.At(x, y).RGBA()
			got := [3]uint32{r >> 8, g >> 8, b >> 8}
			for k := range c {
				d := float64(got[k]) - float64(src[(y*w+x)*c+k])
				se += d * d
			}
		}
	}
	mse := se / float64(w*h*c)
	if mse == 0 {
		return math.Inf(1)
	}
	return 10 * math.Log10(255*255/mse)
}

// TestEncodePSNR encodes photo-like images with nvJPEG and with Go's
// image/jpeg at the same quality and prints both PSNRs against the source;
// nvJPEG must be within 1.5 dB of Go's encoder (and every file must decode).
// Go writes 4:2:0 for colour, so that is what nvJPEG is compared at.
func TestEncodePSNR(t *testing.T) {
	g := openGPU(t)
	for _, sub := range []nvjpeg.Subsampling{nvjpeg.Sub420, nvjpeg.Sub444} {
		enc, err := nvjpeg.NewEncoder(g, sub)
		if err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct{ w, h, c, q int }{
			{640, 480, 3, 90}, {641, 479, 3, 75}, {1, 1, 3, 95}, {4000, 3, 3, 90}, {333, 207, 1, 90}, {640, 480, 3, 50},
		} {
			name := fmt.Sprintf("%s/%dx%dx%d/q%d", sub, tc.w, tc.h, tc.c, tc.q)
			m := photo(tc.w, tc.h, tc.c, uint64(tc.w*tc.h))
			src := packed(m, tc.c)
			file, err := enc.Encode(src, tc.w, tc.h, tc.c, tc.w*tc.c, tc.q)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			var gobuf bytes.Buffer
			var goImg image.Image = m
			if tc.c == 1 {
				gray := image.NewGray(m.Bounds())
				copy(gray.Pix, src)
				goImg = gray
			}
			if err := jpeg.Encode(&gobuf, goImg, &jpeg.Options{Quality: tc.q}); err != nil {
				t.Fatal(err)
			}
			pn, pg := psnr(t, file, src, tc.w, tc.h, tc.c), psnr(t, gobuf.Bytes(), src, tc.w, tc.h, tc.c)
			t.Logf("%s: nvJPEG %.2f dB (%d bytes), Go image/jpeg %.2f dB (%d bytes)", name, pn, len(file), pg, gobuf.Len())
			if sub == nvjpeg.Sub420 && pn < pg-1.5 {
				t.Errorf("%s: nvJPEG %.2f dB is more than 1.5 dB under Go's %.2f dB", name, pn, pg)
			}
		}
		if err := enc.Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := enc.Encode(make([]byte, 3), 1, 1, 3, 3, 90); err == nil {
			t.Error("Encode after Close worked")
		}
	}
	if _, err := nvjpeg.NewEncoder(g, nvjpeg.Subsampling(1)); err == nil {
		t.Error("an encoder with 4:2:2 was made")
	}
}

// BenchmarkBatchedDecode decodes 1920×1080 baseline 4:2:0 photos (Go's
// encoder, quality 90) on the hardware engines, in calls of several sizes
// around the decoder's capacity: img/s and GP/s per call size.
func BenchmarkBatchedDecode(b *testing.B) {
	g := openGPU(b)
	const w, h, files = 1920, 1080, 16
	var data [][]byte
	for i := range files {
		var buf bytes.Buffer
		if err := jpeg.Encode(&buf, photo(w, h, 3, uint64(i)), &jpeg.Options{Quality: 90}); err != nil {
			b.Fatal(err)
		}
		data = append(data, buf.Bytes())
	}
	release, err := g.Bind()
	if err != nil {
		b.Fatal(err)
	}
	defer release()
	hw, err := nvjpeg.NewHandle(nvjpeg.BackendHardware)
	if err != nil {
		b.Skipf("no hardware decoder: %v", err)
	}
	defer hw.Destroy()
	engines, cores, err := hw.HardwareInfo()
	if err != nil {
		b.Fatal(err)
	}
	capacity := nvjpeg.BatchCapacity(engines, cores)
	b.Logf("%d engines × %d cores: capacity %d", engines, cores, capacity)
	s, err := cu.StreamCreate(true)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Destroy()
	for _, n := range []int{max(1, capacity/4), max(1, capacity/2), capacity, 2 * capacity} {
		b.Run(fmt.Sprintf("call=%d", n), func(b *testing.B) {
			dec, err := hw.NewBatchDecoder()
			if err != nil {
				b.Fatal(err)
			}
			defer dec.Destroy()
			out, err := cu.MemAlloc(uint64(n * w * h * 3))
			if err != nil {
				b.Fatal(err)
			}
			defer cu.MemFree(out)
			in := make([][]byte, n)
			dst := make([]nvjpeg.Dst, n)
			for i := range n {
				p, err := cu.MemHostAlloc(len(data[i%files]))
				if err != nil {
					b.Fatal(err)
				}
				defer cu.MemFreeHost(p)
				copy(p, data[i%files])
				in[i], dst[i] = p, nvjpeg.Dst{Ptr: out + cu.DevicePtr(i*w*h*3), Pitch: w * 3}
			}
			if err := dec.Decode(in, dst, s); err != nil { // warm-up
				b.Fatal(err)
			}
			if err := s.Synchronize(); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for b.Loop() { // each call waited for, as the pipeline's download would
				if err := dec.Decode(in, dst, s); err != nil {
					b.Fatal(err)
				}
				if err := s.Synchronize(); err != nil {
					b.Fatal(err)
				}
			}
			imgs := float64(b.N*n) / b.Elapsed().Seconds()
			b.ReportMetric(imgs, "img/s")
			b.ReportMetric(imgs*w*h/1e9, "GP/s")
		})
	}
}
