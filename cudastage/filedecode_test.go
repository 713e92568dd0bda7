package cudastage

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/imgpipe/imgpipe/stages"
)

// orientRef is kernels/orient.cu's mapping in Go: the upright (stored) sw×sh
// RGB image src turned by orientation o. TestOrientMapping proves it equal to
// what stages does for the CPU decoders, and the GPU test proves the kernel
// equal to it.
func orientRef(src []byte, sw, sh, o int) []byte {
	dw, dh := sw, sh
	if o >= 5 {
		dw, dh = sh, sw
	}
	out := make([]byte, 0, len(src))
	for dy := range dh {
		for dx := range dw {
			var x, y int
			switch o {
			case 2:
				x, y = sw-1-dx, dy
			case 3:
				x, y = sw-1-dx, sh-1-dy
			case 4:
				x, y = dx, sh-1-dy
			case 5:
				x, y = dy, dx
			case 6:
				x, y = dy, sh-1-dx
			case 7:
				x, y = sw-1-dy, sh-1-dx
			case 8:
				x, y = sw-1-dy, dx
			default:
				x, y = dx, dy
			}
			out = append(out, src[(y*sw+x)*3:(y*sw+x)*3+3]...)
		}
	}
	return out
}

// stagesFixture reads one of stages/testdata's files.
func stagesFixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "stages", "testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestOrientMapping: the orientation kernel's mapping turns orient_1.jpg's
// pixels into exactly what stages.Decode gives for orient_N.jpg (the same
// scan data with EXIF orientation N), for every N.
func TestOrientMapping(t *testing.T) {
	up, err := stages.Decode(stagesFixture(t, "orient_1.jpg"), stages.DecodeOptions{Orient: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for o := 1; o <= 8; o++ {
		for _, suffix := range []string{"", "_le"} {
			name := fmt.Sprintf("orient_%d%s.jpg", o, suffix)
			if _, err := os.Stat(filepath.Join("..", "stages", "testdata", name)); err != nil {
				continue
			}
			want, err := stages.Decode(stagesFixture(t, name), stages.DecodeOptions{Orient: true}, nil)
			if err != nil {
				t.Fatal(err)
			}
			got := orientRef(up.Pix, up.W, up.H, o)
			if string(got) != string(want.Pix) {
				t.Errorf("%s: the kernel's mapping differs from stages'", name)
			}
		}
	}
}

func TestNVJPEGInfoString(t *testing.T) {
	for _, tc := range []struct {
		in   NVJPEGInfo
		want string
	}{
		{NVJPEGInfo{Path: "/usr/local/cuda/lib64/libnvjpeg.so.13", Version: "13.0.1", Engines: 7, Cores: 5},
			"/usr/local/cuda/lib64/libnvjpeg.so.13 (version 13.0.1), 7 hardware decode engines × 5 cores"},
		{NVJPEGInfo{Path: "libnvjpeg.so.12", Version: "12.3.3", HWError: "nvjpegCreateEx: NVJPEG_STATUS_ARCH_MISMATCH"},
			"libnvjpeg.so.12 (version 12.3.3), no hardware decode engines (nvjpegCreateEx: NVJPEG_STATUS_ARCH_MISMATCH): JPEGs go to the CUDA decoder"},
		{NVJPEGInfo{Error: "nvJPEG: library not found (tried ...)"}, "none: nvJPEG: library not found (tried ...)"},
	} {
		if got := tc.in.String(); got != tc.want {
			t.Errorf("got  %q\nwant %q", got, tc.want)
		}
	}
}

// TestNVJPEGHere: without nvJPEG (CI), the info says why, naming the
// override variable.
func TestNVJPEGHere(t *testing.T) {
	t.Setenv("IMGPIPE_NVJPEG", "")
	info := NVJPEG(0)
	if info.Error == "" {
		t.Skipf("nvJPEG is here: %s", info)
	}
	if !strings.Contains(info.Error, "nvJPEG") || info.Engines != 0 {
		t.Errorf("%+v", info)
	}
}
