package cudastage

import (
	"bytes"
	"fmt"
	"image/jpeg"
	"math"
	"testing"

	"github.com/imgpipe/imgpipe/stages"
)

// maxJPEGPSNRLoss is how far under the CPU encoder's PSNR (Go's image/jpeg,
// what save format=jpeg writes on the CPU) the device's nvJPEG file may be,
// both against the source at the same quality 75..95 and 4:2:0. Measured on
// an H100: 32.66 dB for nvJPEG against 32.64 dB for Go at q90.
const maxJPEGPSNRLoss = 0.5

// TestGPUJPEGEncodePSNR encodes photo-like images (smooth gradients with
// noise) through the device's JPEG encoder, as a GPU run's save workers do,
// and with stages' CPU encoder, and checks: the file decodes to the image's
// size, colour files are 4:2:0 and gray ones have one component, and the
// PSNR against the source is within maxJPEGPSNRLoss of the CPU encoder's.
// It also checks rows with padding (a stride above W·C) and the error paths.
func TestGPUJPEGEncodePSNR(t *testing.T) {
	d := jpegDevice(t)
	if err := d.JPEGEncoderAvailable(); err != nil {
		t.Fatal(err)
	}
	enc, err := d.NewJPEGEncoder()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		w, h, c, pad, q int
	}{
		{640, 480, 3, 0, 90}, {641, 479, 3, 5, 75}, {1024, 768, 3, 0, 95}, {333, 207, 1, 3, 90}, {640, 480, 1, 0, 75},
	} {
		name := fmt.Sprintf("%dx%dx%d+%d/q%d", c.w, c.h, c.c, c.pad, c.q)
		t.Run(name, func(t *testing.T) {
			m := padded(pngTestImage("smooth", pngShape{c.w, c.h, c.c}, 11), c.w, c.h, c.c, c.pad)
			dev, err := enc.Encode(m, c.q)
			if err != nil {
				t.Fatal(err)
			}
			var cpu bytes.Buffer
			if err := stages.Encode(&cpu, m, stages.SaveOptions{Format: "jpeg", Quality: c.q}); err != nil {
				t.Fatal(err)
			}
			wantComps := map[int]string{1: "1", 3: "3 2x2 1x1 1x1"}[c.c]
			for _, f := range []struct {
				who  string
				file []byte
			}{{"nvJPEG", dev}, {"CPU", cpu.Bytes()}} {
				if got := sofComponents(f.file); got != wantComps {
					t.Errorf("%s file: components %q, want %q", f.who, got, wantComps)
				}
			}
			pd, pc := jpegPSNR(t, dev, m), jpegPSNR(t, cpu.Bytes(), m)
			t.Logf("nvJPEG %.2f dB (%d bytes), CPU %.2f dB (%d bytes)", pd, len(dev), pc, cpu.Len())
			if pd < pc-maxJPEGPSNRLoss {
				t.Errorf("nvJPEG %.2f dB is more than %.1f dB under the CPU encoder's %.2f dB", pd, maxJPEGPSNRLoss, pc)
			}
		})
	}
	if _, err := enc.Encode(stages.NewImage(8, 8, 3), 0); err == nil {
		t.Error("quality 0 was encoded")
	}
	if _, err := enc.Encode(&stages.Image{W: 8, H: 8, C: 3, Stride: 24, Pix: make([]byte, 100)}, 90); err == nil {
		t.Error("a short pixel buffer was encoded")
	}
	if err := enc.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := enc.Encode(stages.NewImage(8, 8, 3), 90); err == nil {
		t.Error("Encode after Close worked")
	}
	if err := d.g.Err(); err != nil {
		t.Errorf("the bad calls broke the GPU: %v", err)
	}
}

// padded copies tightly packed pixels into an image whose rows are pad
// bytes longer, the padding filled with 0xAA (which must not show).
func padded(pix []byte, w, h, c, pad int) *stages.Image {
	m := &stages.Image{W: w, H: h, C: c, Stride: w*c + pad, Pix: bytes.Repeat([]byte{0xAA}, h*(w*c+pad))}
	for y := range h {
		copy(m.Row(y), pix[y*w*c:(y+1)*w*c])
	}
	return m
}

// sofComponents describes a JPEG's frame header: the component count, then
// for colour each component's sampling factors H×V ("3 2x2 1x1 1x1" is
// 4:2:0), or "" when there is none.
func sofComponents(b []byte) string {
	for i := 2; i+4 <= len(b); {
		if b[i] != 0xFF {
			return ""
		}
		m, n := b[i+1], int(b[i+2])<<8|int(b[i+3])
		if m >= 0xC0 && m <= 0xC2 {
			if i+10 > len(b) {
				return ""
			}
			nc := int(b[i+9])
			s := fmt.Sprint(nc)
			for k := 0; nc > 1 && k < nc && i+12+3*k < len(b); k++ {
				f := b[i+11+3*k]
				s += fmt.Sprintf(" %dx%d", f>>4, f&15)
			}
			return s
		}
		i += 2 + n
	}
	return ""
}

// jpegPSNR decodes file with Go's decoder and returns its PSNR against m,
// in dB, over m's channels.
func jpegPSNR(t *testing.T, file []byte, m *stages.Image) float64 {
	t.Helper()
	img, err := jpeg.Decode(bytes.NewReader(file))
	if err != nil {
		t.Fatal(err)
	}
	if b := img.Bounds(); b.Dx() != m.W || b.Dy() != m.H {
		t.Fatalf("decoded %v, want %dx%d", b, m.W, m.H)
	}
	var se float64
	for y := range m.H {
		row := m.Row(y)
		for x := range m.W {
			r, g, b, _ := img.At(x, y).RGBA()
			got := [3]uint32{r >> 8, g >> 8, b >> 8}
			for k := range m.C {
				d := float64(got[k]) - float64(row[x*m.C+k])
				se += d * d
			}
		}
	}
	mse := se / float64(m.W*m.H*m.C)
	if mse == 0 {
		return math.Inf(1)
	}
	return 10 * math.Log10(255*255/mse)
}
