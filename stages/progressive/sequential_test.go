package progressive

import (
	"bytes"
	"io/fs"
	"math/bits"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/imgpipe/imgpipe/stages/jpegmarker"
	"github.com/imgpipe/imgpipe/stages/jpegturbo"
)

// decode decodes data with libjpeg-turbo at 1/denom, as package stages does.
func decode(t testing.TB, data []byte, denom int) []byte {
	t.Helper()
	hd, err := jpegturbo.DecodeHeader(data)
	if err != nil {
		t.Fatal(err)
	}
	w, h := jpegturbo.ScaledSize(hd.W, hd.H, denom)
	pix := make([]byte, w*h*3)
	if err := jpegturbo.DecodeScaled(data, pix, denom, w, h, w*3, jpegturbo.PixelRGB); err != nil {
		t.Fatal(err)
	}
	return pix
}

func requireTurbo(t testing.TB) {
	t.Helper()
	if err := jpegturbo.Available(); err != nil {
		t.Skipf("libjpeg-turbo: %v", err)
	}
}

func fixture(t testing.TB, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// checkSame rewrites data for each scale and checks that libjpeg-turbo decodes the result
// to data's bytes; it returns the error of the first rewrite that failed.
func checkSame(t *testing.T, name string, data []byte) error {
	t.Helper()
	for _, denom := range jpegturbo.ScaleDenoms {
		seq, err := Sequential(nil, data, denom)
		if err != nil {
			return err
		}
		if bytes.Contains(seq[2:], []byte{0xff, 0xc2}) && !bytes.Contains(seq, []byte{0xff, 0xc0}) {
			t.Errorf("%s: the output is not sequential", name)
		}
		if got, want := decode(t, seq, denom), decode(t, data, denom); !bytes.Equal(got, want) {
			t.Errorf("%s at 1/%d: the sequential file decodes to other bytes", name, denom)
		}
	}
	return nil
}

// A rewritten file decodes to the progressive file's bytes at every scale, for every
// subsampling and scan script of the fixtures (restart markers, one AC scan a component, a
// first AC scan that leaves out coefficients 1-9, a 2x3 frame).
func TestSequential(t *testing.T) {
	requireTurbo(t)
	for _, name := range []string{
		"progressive/p420.jpg", "progressive/p422.jpg", "progressive/p444.jpg",
		"progressive/gray.jpg", "progressive/restart.jpg", "progressive/spectral.jpg",
		"progressive/late.jpg", "progressive/tiny.jpg", "progressive.jpg", "progressive_gray.jpg",
	} {
		if err := checkSame(t, name, fixture(t, name)); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// idctReads has libjpeg-turbo's counts: 1, 25, 49 and 64 coefficients, always the DC one.
func TestIDCTReads(t *testing.T) {
	for size, want := range map[int]int{1: 1, 2: 25, 4: 49, 8: 64} {
		if got := bits.OnesCount64(idctReads[size]); got != want || idctReads[size]&1 == 0 {
			t.Errorf("size %d: %d coefficients (%#x), want %d with the DC one", size, got, idctReads[size], want)
		}
	}
}

// With IMGPIPE_TEST_PHOTOS set to a folder, every progressive JPEG in it is checked too.
func TestSequentialPhotos(t *testing.T) {
	dir := os.Getenv("IMGPIPE_TEST_PHOTOS")
	if dir == "" {
		t.Skip("IMGPIPE_TEST_PHOTOS is not set")
	}
	requireTurbo(t)
	n, refused := 0, 0
	err := filepath.WalkDir(dir, func(path string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() || !strings.HasSuffix(strings.ToLower(path), ".jpg") {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if !progressiveFrame(data) {
			return nil
		}
		n++
		if err := checkSame(t, path, data); err != nil {
			refused++
			t.Logf("%s: %v", path, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d progressive photos, %d not rewritten", n, refused)
}

// progressiveFrame reports whether data's frame header is SOF2.
func progressiveFrame(data []byte) bool {
	m, _, _ := frameHeader(data)
	return m == 0xc2
}

// frameHeader returns the marker of data's frame header and the frame's size, 0s when it
// has none.
func frameHeader(data []byte) (m byte, w, h int) {
	jpegmarker.Segments(data, func(mk byte, seg []byte, _, _ int) bool {
		if !jpegmarker.IsSOF(mk) || len(seg) < 5 {
			return true
		}
		m, w, h = mk, int(seg[3])<<8|int(seg[4]), int(seg[1])<<8|int(seg[2])
		return false
	})
	return m, w, h
}
