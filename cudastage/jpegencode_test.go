package cudastage

import (
	"bytes"
	"testing"

	"github.com/imgpipe/imgpipe/stages"
)

// TestJPEGTestHelpers checks, on the CPU, the helpers TestGPUJPEGEncodePSNR
// judges nvJPEG with: sofComponents reads the CPU encoder's 4:2:0 and gray
// frames and nothing from bytes that are no JPEG, and jpegPSNR gives a
// plausible figure for a q90 photo-like file and a lower one at q20.
func TestJPEGTestHelpers(t *testing.T) {
	enc := func(m *stages.Image, q int) []byte {
		var b bytes.Buffer
		if err := stages.Encode(&b, m, stages.SaveOptions{Format: "jpeg", Quality: q}); err != nil {
			t.Fatal(err)
		}
		return b.Bytes()
	}
	rgb := padded(pngTestImage("smooth", pngShape{97, 61, 3}, 1), 97, 61, 3, 7)
	gray := padded(pngTestImage("smooth", pngShape{97, 61, 1}, 1), 97, 61, 1, 0)
	for _, c := range []struct {
		name string
		file []byte
		want string
	}{
		{"rgb", enc(rgb, 90), "3 2x2 1x1 1x1"},
		{"gray", enc(gray, 90), "1"},
		{"not a JPEG", []byte("\x89PNG\r\n\x1a\n"), ""},
		{"truncated", enc(rgb, 90)[:20], ""},
	} {
		if got := sofComponents(c.file); got != c.want {
			t.Errorf("%s: sofComponents %q, want %q", c.name, got, c.want)
		}
	}
	hi, lo := jpegPSNR(t, enc(rgb, 90), rgb), jpegPSNR(t, enc(rgb, 20), rgb)
	if hi < 25 || hi > 60 || lo >= hi {
		t.Errorf("PSNR q90 %.2f dB, q20 %.2f dB: want 25..60 and q20 lower", hi, lo)
	}
}
