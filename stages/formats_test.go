package stages

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/image/tiff"

	"github.com/imgpipe/imgpipe/stages/libwebp"
	"github.com/imgpipe/imgpipe/stages/npy"
)

// asRGB returns m as C = 3 (gray expanded to R = G = B), tightly packed: what a decoder of a
// lossless output of m must give.
func asRGB(m *Image) *Image {
	out := NewImage(m.W, m.H, 3)
	for y := 0; y < m.H; y++ {
		for x := 0; x < m.W; x++ {
			for ch := 0; ch < 3; ch++ {
				out.Pix[y*out.Stride+3*x+ch] = at(m, x, y, ch%m.C)
			}
		}
	}
	return out
}

func TestSaveFormatsTable(t *testing.T) {
	if got := strings.Join(SaveFormats(), ","); got != "png,jpeg,webp,tiff,npy" {
		t.Fatalf("SaveFormats() = %s", got)
	}
	for _, tc := range []struct{ name, ext, norm string }{
		{"png", "png", "png"}, {"jpeg", "jpg", "jpeg"}, {"JPG", "jpg", "jpeg"}, {"webp", "webp", "webp"},
		{"tiff", "tif", "tiff"}, {"tif", "tif", "tiff"}, {"npy", "npy", "npy"}, {"gif", "", ""},
	} {
		if got := FormatExt(tc.name); got != tc.ext {
			t.Errorf("FormatExt(%q) = %q, want %q", tc.name, got, tc.ext)
		}
		o, err := SaveOptions{Format: tc.name}.normalize()
		if (err != nil) != (tc.norm == "") || err == nil && o.Format != tc.norm {
			t.Errorf("normalize(%q) = %q, %v; want %q", tc.name, o.Format, err, tc.norm)
		}
	}
}

// Lossless formats give back exactly the pixels, on every test shape, C = 1 and 3, with
// poisoned strides.
func TestEncodeTIFFRoundTrip(t *testing.T) {
	for _, comp := range []int{PNGFast, PNGNoCompression, 6} {
		t.Run(fmt.Sprint("compression", comp), func(t *testing.T) {
			forShapes(t, func(t *testing.T, rng *rand.Rand, s shape, c int) {
				src := randImage(rng, s.w, s.h, c, s.pad)
				var b bytes.Buffer
				if err := Encode(&b, src, SaveOptions{Format: "tiff", Compression: comp}); err != nil {
					t.Fatal(err)
				}
				std, err := tiff.Decode(&b)
				if err != nil {
					t.Fatal(err)
				}
				sameImage(t, fromStd(std), asRGB(src))
				checkPadding(t, src)
			})
		})
	}
}

func TestEncodeWebPLossless(t *testing.T) {
	if err := libwebp.Available(); err != nil {
		t.Skipf("libwebp not loadable (install libwebp7): %v", err)
	}
	forShapes(t, func(t *testing.T, rng *rand.Rand, s shape, c int) {
		src := randImage(rng, s.w, s.h, c, s.pad)
		var b bytes.Buffer
		if err := Encode(&b, src, SaveOptions{Format: "webp", Lossless: true}); err != nil {
			t.Fatal(err)
		}
		got, err := Decode(b.Bytes(), DecodeOptions{MaxPixels: DefaultMaxPixels}, nil)
		if err != nil {
			t.Fatal(err)
		}
		sameImage(t, got, asRGB(src))
	})
}

// parseNPY reads an .npy file's version 1.0 header and returns its dictionary and data.
func parseNPY(t *testing.T, b []byte) (string, []byte) {
	t.Helper()
	if len(b) < 10 || string(b[:8]) != "\x93NUMPY\x01\x00" {
		t.Fatalf("no npy 1.0 magic: %q", b[:min(len(b), 10)])
	}
	n := int(binary.LittleEndian.Uint16(b[8:10]))
	if (10+n)%npy.Align != 0 || b[10+n-1] != '\n' {
		t.Fatalf("header of %d bytes: data not %d-aligned or no final newline", n, npy.Align)
	}
	return strings.TrimRight(string(b[10:10+n]), " \n"), b[10+n:]
}

func TestEncodeNPY(t *testing.T) {
	forShapes(t, func(t *testing.T, rng *rand.Rand, s shape, c int) {
		src := randImage(rng, s.w, s.h, c, s.pad)
		var b bytes.Buffer
		if err := Encode(&b, src, SaveOptions{Format: "npy"}); err != nil {
			t.Fatal(err)
		}
		dict, data := parseNPY(t, b.Bytes())
		want := fmt.Sprintf("{'descr': '|u1', 'fortran_order': False, 'shape': (%d, %d, %d), }", s.h, s.w, c)
		if dict != want {
			t.Fatalf("header %s, want %s", dict, want)
		}
		var packed []byte
		for y := 0; y < s.h; y++ {
			packed = append(packed, src.Row(y)...)
		}
		if !bytes.Equal(data, packed) {
			t.Fatal("data is not the image's rows in C order")
		}
	})
}

// TestNPYLoadsInNumPy has numpy itself load files of both channel counts: the promise is that
// numpy.load gives the uint8 H×W×C array as is.
func TestNPYLoadsInNumPy(t *testing.T) {
	// The python3 on PATH may be a version manager's without numpy; Debian's may have it.
	py := ""
	for _, cand := range []string{"python3", "/usr/bin/python3"} {
		if p, err := exec.LookPath(cand); err == nil && exec.Command(p, "-c", "import numpy").Run() == nil {
			py = p
			break
		}
	}
	if py == "" {
		t.Skip("no python3 with numpy (Debian: python3-numpy)")
	}
	dir := t.TempDir()
	rng := rand.New(rand.NewSource(3))
	for _, c := range []int{1, 3} {
		src := randImage(rng, 13, 7, c, 5)
		var b bytes.Buffer
		if err := Encode(&b, src, SaveOptions{Format: "npy"}); err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, fmt.Sprintf("c%d.npy", c))
		if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		// numpy prints the shape, the dtype and pixel (x=12, y=6)'s last channel.
		out, err := exec.Command(py, "-c", "import numpy, sys; a = numpy.load(sys.argv[1]); print(a.shape, a.dtype, a[6, 12, -1])", path).CombinedOutput()
		if err != nil {
			t.Fatalf("numpy.load: %v\n%s", err, out)
		}
		want := fmt.Sprintf("(7, 13, %d) uint8 %d", c, at(src, 12, 6, c-1))
		if got := strings.TrimSpace(string(out)); got != want {
			t.Errorf("C=%d: numpy says %q, want %q", c, got, want)
		}
	}
}

func TestEncodeFormatErrors(t *testing.T) {
	ok := NewImage(8, 8, 3)
	for _, tc := range []struct {
		name string
		m    *Image
		opt  SaveOptions
		w    *failWriter
		want string
	}{
		{"tiff write fails", ok, SaveOptions{Format: "tiff"}, &failWriter{after: 4}, "disk full"},
		{"npy write fails", ok, SaveOptions{Format: "npy"}, &failWriter{after: 70}, "disk full"},
		{"webp too wide", &Image{W: libwebp.MaxDimension + 1, H: 1, C: 1, Stride: libwebp.MaxDimension + 1, Pix: make([]byte, libwebp.MaxDimension+1)},
			SaveOptions{Format: "webp"}, &failWriter{after: 1 << 30}, "want 1..16383"},
	} {
		err := Encode(tc.w, tc.m, tc.opt)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one containing %q", tc.name, err, tc.want)
		}
	}
	if err := encodeTIFF(&failWriter{}, &Image{W: 1 << 16, H: 1 << 14, C: 3}, 0); err == nil || !strings.Contains(err.Error(), "4 GiB") {
		t.Errorf("a 65536x16384 TIFF: error %v, want the 4 GiB limit (before any copy)", err)
	}
	if libwebp.Available() != nil {
		var b bytes.Buffer
		err := Encode(&b, ok, SaveOptions{Format: "webp"})
		if !errors.Is(err, libwebp.ErrUnavailable) || b.Len() != 0 {
			t.Errorf("webp without libwebp: error %v, %d bytes written; want ErrUnavailable and nothing", err, b.Len())
		}
	}
}
