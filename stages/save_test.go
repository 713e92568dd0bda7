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
	"path/filepath"
	"strings"
	"testing"

	"github.com/imgpipe/imgpipe/stages/pngfast"
)

// smoothImage is a photo-like w×h×c picture: gradients plus mild noise.
func smoothImage(rng *rand.Rand, w, h, c, pad int) *Image {
	m := newPadded(w, h, c, pad)
	for y := 0; y < h; y++ {
		row := m.Row(y)
		for x := 0; x < w; x++ {
			for ch := 0; ch < c; ch++ {
				v := (x*(ch+1)*255/max(1, w) + y*255/max(1, h)) / 2
				row[x*c+ch] = byte(min(255, v+rng.Intn(4)))
			}
		}
	}
	return m
}

func TestEncodePNGRoundTrip(t *testing.T) {
	for _, level := range []int{PNGFast, PNGNoCompression, 1, 2, 6, 9} {
		t.Run(fmt.Sprint("level", level), func(t *testing.T) {
			forShapes(t, func(t *testing.T, rng *rand.Rand, s shape, c int) {
				for _, src := range []*Image{randImage(rng, s.w, s.h, c, s.pad), smoothImage(rng, s.w, s.h, c, s.pad)} {
					var b bytes.Buffer
					if err := Encode(&b, src, SaveOptions{Format: "png", Compression: level}); err != nil {
						t.Fatal(err)
					}
					std, err := png.Decode(&b)
					if err != nil {
						t.Fatal(err)
					}
					switch std.(type) {
					case *image.Gray:
						if c != 1 {
							t.Fatalf("C=%d written as gray", c)
						}
					case *image.RGBA: // image/png's type for 8-bit RGB
						if c != 3 {
							t.Fatalf("C=%d written as RGB", c)
						}
					default:
						t.Fatalf("decoded as %T", std)
					}
					got := fromStd(std)
					if c == 1 {
						g := NewImage(got.W, got.H, 1)
						Grayscale(g, got) // R = G = B, so Y is the value
						got = g
					}
					sameImage(t, got, src)
				}
			})
		})
	}
}

// TestPNGFastIsPngfast checks the wiring: Encode's default PNG is pngfast's
// file, and EncodePNGFast writes the same bytes within PNGFastBound.
func TestPNGFastIsPngfast(t *testing.T) {
	rng := rand.New(rand.NewSource(8))
	for _, src := range []*Image{smoothImage(rng, 31, 17, 3, 5), randImage(rng, 300, 250, 1, 0)} {
		want := pngfast.Append(nil, src.Pix, src.W, src.H, src.C, src.Stride)
		var b bytes.Buffer
		if err := Encode(&b, src, SaveOptions{}); err != nil {
			t.Fatal(err)
		}
		dst := make([]byte, PNGFastBound(src.Shape()))
		n := EncodePNGFast(dst, src)
		if !bytes.Equal(b.Bytes(), want) || !bytes.Equal(dst[:n], want) {
			t.Errorf("%dx%dx%d: Encode or EncodePNGFast differ from pngfast", src.W, src.H, src.C)
		}
	}
}

// TestPNGLevels checks that the levels are really different settings:
// smaller files at higher levels on compressible data, and stored data at
// level -1.
func TestPNGLevels(t *testing.T) {
	src := smoothImage(rand.New(rand.NewSource(5)), 256, 128, 3, 0)
	size := map[int]int{}
	for _, level := range []int{PNGNoCompression, PNGFast, 1, 9} {
		var b bytes.Buffer
		if err := Encode(&b, src, SaveOptions{Compression: level}); err != nil {
			t.Fatal(err)
		}
		size[level] = b.Len()
	}
	if raw := 256 * 128 * 3; size[PNGNoCompression] < raw || size[PNGFast] >= raw/2 || size[1] >= raw/2 || size[9] >= size[1] {
		t.Fatalf("sizes by level %v (raw %d)", size, raw)
	}
}

// specPaeth is the Paeth predictor as the PNG specification writes it.
func specPaeth(a, b, c int) int {
	p := a + b - c
	pa, pb, pc := abs(p-a), abs(p-b), abs(p-c)
	if pa <= pb && pa <= pc {
		return a
	} else if pb <= pc {
		return b
	}
	return c
}

// TestPaeth checks the predictor on every (a, b, c), ties included.
func TestPaeth(t *testing.T) {
	for i := 0; i < 1<<24; i++ {
		a, b, c := i>>16, (i>>8)&255, i&255
		if got := paeth(byte(a), byte(b), byte(c)); int(got) != specPaeth(a, b, c) {
			t.Fatalf("paeth(%d,%d,%d) = %d, want %d", a, b, c, got, specPaeth(a, b, c))
		}
	}
}

// unfilter undoes PNG filter f on line given the previous raw row, written
// from the PNG specification independently of the encoder.
func unfilter(f byte, line, prev []byte, bpp int) []byte {
	out := make([]byte, len(line))
	for i := range line {
		var a, b, c int
		if i >= bpp {
			a, c = int(out[i-bpp]), int(prev[i-bpp])
		}
		b = int(prev[i])
		var pred int
		switch f {
		case 1:
			pred = a
		case 2:
			pred = b
		case 3:
			pred = (a + b) / 2
		case 4:
			pred = specPaeth(a, b, c)
		}
		out[i] = line[i] + byte(pred)
	}
	return out
}

func TestPNGFilters(t *testing.T) {
	rng := rand.New(rand.NewSource(9))
	for _, bpp := range []int{1, 3} {
		for _, n := range []int{bpp, 5 * bpp, 64 * bpp} {
			prev, cur := make([]byte, n), make([]byte, n)
			rng.Read(prev)
			rng.Read(cur)
			var out [nFilters][]byte
			for f := range out {
				out[f] = make([]byte, n+1)
				out[f][0] = byte(f)
			}
			best := filterAdaptive(&out, cur, prev, bpp)
			for f := range out {
				if got := unfilter(byte(f), out[f][1:], prev, bpp); !bytes.Equal(got, cur) {
					t.Fatalf("bpp %d n %d: filter %d does not invert", bpp, n, f)
				}
			}
			sub := make([]byte, n)
			filterSub(sub, cur, bpp)
			if !bytes.Equal(unfilter(1, sub, make([]byte, n), bpp), cur) {
				t.Fatalf("filterSub does not invert")
			}
			if got := unfilter(best[0], best[1:], prev, bpp); !bytes.Equal(got, cur) {
				t.Fatalf("chosen filter %d does not invert", best[0])
			}
		}
	}
	// Identical rows: Up gives all zeros and must win.
	row := []byte{9, 200, 3, 77, 5, 6}
	var out [nFilters][]byte
	for f := range out {
		out[f] = make([]byte, len(row)+1)
		out[f][0] = byte(f)
	}
	if best := filterAdaptive(&out, row, row, 3); best[0] != ftUp {
		t.Fatalf("identical rows chose filter %d, want Up", best[0])
	}
}

func TestEncodeJPEG(t *testing.T) {
	rng := rand.New(rand.NewSource(4))
	for _, c := range []int{1, 3} {
		for _, s := range []shape{{1, 1, 0}, {17, 9, 5}, {64, 48, 0}, {1000, 3, 8}} {
			src := smoothImage(rng, s.w, s.h, c, s.pad)
			var b bytes.Buffer
			if err := Encode(&b, src, SaveOptions{Format: "jpeg"}); err != nil {
				t.Fatal(err)
			}
			std, err := jpeg.Decode(bytes.NewReader(b.Bytes()))
			if err != nil {
				t.Fatal(err)
			}
			if _, gray := std.(*image.Gray); gray != (c == 1) {
				t.Fatalf("C=%d decoded as %T", c, std)
			}
			got := fromStd(std)
			if got.W != s.w || got.H != s.h {
				t.Fatalf("size %dx%d", got.W, got.H)
			}
			var sum, worst int
			for y := 0; y < s.h; y++ {
				for x := 0; x < s.w; x++ {
					for ch := 0; ch < 3; ch++ {
						d := abs(int(at(got, x, y, ch)) - int(at(src, x, y, ch%c)))
						sum += d
						worst = max(worst, d)
					}
				}
			}
			if mean := float64(sum) / float64(s.w*s.h*3); mean > 4 || worst > 40 {
				t.Fatalf("C=%d %v: mean error %.2f, worst %d at quality 95", c, s, mean, worst)
			}
		}
	}
	// Quality matters.
	src := smoothImage(rng, 128, 96, 3, 0)
	var lo, hi bytes.Buffer
	if err := Encode(&lo, src, SaveOptions{Format: "jpg", Quality: 10}); err != nil {
		t.Fatal(err)
	}
	if err := Encode(&hi, src, SaveOptions{Format: "JPEG", Quality: 100}); err != nil {
		t.Fatal(err)
	}
	if lo.Len()*2 > hi.Len() {
		t.Fatalf("quality 10 gives %d bytes, quality 100 %d", lo.Len(), hi.Len())
	}
}

type failWriter struct{ after int }

func (f *failWriter) Write(p []byte) (int, error) {
	if f.after < len(p) {
		return 0, errors.New("disk full")
	}
	f.after -= len(p)
	return len(p), nil
}

func TestEncodeErrors(t *testing.T) {
	ok := NewImage(8, 8, 3)
	for _, tc := range []struct {
		name string
		m    *Image
		opt  SaveOptions
		w    io.Writer
		msg  string
	}{
		{"format", ok, SaveOptions{Format: "gif"}, io.Discard, `unknown save format "gif"`},
		{"quality high", ok, SaveOptions{Format: "jpeg", Quality: 101}, io.Discard, "quality 101"},
		{"quality negative", ok, SaveOptions{Format: "jpeg", Quality: -3}, io.Discard, "quality -3"},
		{"compression", ok, SaveOptions{Compression: 10}, io.Discard, "compression 10"},
		{"compression low", ok, SaveOptions{Compression: -2}, io.Discard, "compression -2 is not in -1..9"},
		{"nil image", nil, SaveOptions{}, io.Discard, "no image"},
		{"bad image", &Image{W: 2, H: 2, C: 4, Stride: 8, Pix: make([]byte, 16)}, SaveOptions{}, io.Discard, "channels"},
		{"jpeg too wide", &Image{W: 70000, H: 1, C: 3, Stride: 210000, Pix: make([]byte, 210000)}, SaveOptions{Format: "jpeg"}, io.Discard, "over JPEG's 65535 limit"},
		{"png write fails", ok, SaveOptions{}, &failWriter{after: 20}, "disk full"},
		{"png write fails late", smoothImage(rand.New(rand.NewSource(1)), 400, 300, 3, 0), SaveOptions{Compression: -1}, &failWriter{after: 100000}, "disk full"},
		{"jpeg write fails", ok, SaveOptions{Format: "jpeg"}, &failWriter{after: 20}, "disk full"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Encode(tc.w, tc.m, tc.opt)
			if err == nil || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("error %v, want one containing %q", err, tc.msg)
			}
			if v := tc.opt.Validate(); (v != nil) != (tc.name == "format" || strings.HasPrefix(tc.name, "quality") || strings.HasPrefix(tc.name, "compression")) {
				t.Fatalf("Validate: %v", v)
			}
		})
	}
}

// listDir returns the names in dir.
func listDir(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names
}

func TestWriteFileAtomic(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "a", "b", "out.png")
	var during []string
	err := WriteFileAtomic(path, func(w io.Writer) error {
		during = listDir(t, filepath.Dir(path))
		_, err := w.Write([]byte("hello"))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(during) != 1 || !strings.HasPrefix(during[0], ".out.png") || !strings.Contains(during[0], TempMarker) {
		t.Fatalf("while writing the folder held %v, want one hidden temp file", during)
	}
	if b, err := os.ReadFile(path); err != nil || string(b) != "hello" {
		t.Fatalf("content %q, %v", b, err)
	}
	if got := listDir(t, filepath.Dir(path)); len(got) != 1 || got[0] != "out.png" {
		t.Fatalf("folder holds %v", got)
	}
	if st, _ := os.Stat(path); st.Mode().Perm() != 0o644 {
		t.Fatalf("mode %v", st.Mode())
	}

	// Replacing works and is whole.
	if err := WriteFileAtomic(path, func(w io.Writer) error { _, err := w.Write([]byte("second")); return err }); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(path); string(b) != "second" {
		t.Fatalf("content %q after replace", b)
	}
}

func TestWriteFileAtomicFailures(t *testing.T) {
	dir := t.TempDir()
	existing := filepath.Join(dir, "keep.png")
	if err := os.WriteFile(existing, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("encoder failed")
	for _, tc := range []struct {
		name  string
		path  string
		write func(io.Writer) error
	}{
		{"error before writing", filepath.Join(dir, "new.png"), func(io.Writer) error { return boom }},
		{"error after writing", filepath.Join(dir, "new.png"), func(w io.Writer) error {
			w.Write(bytes.Repeat([]byte("x"), 1<<20))
			return boom
		}},
		{"existing file kept", existing, func(w io.Writer) error {
			w.Write([]byte("partial new content"))
			return boom
		}},
		{"encode error", filepath.Join(dir, "enc.png"), func(w io.Writer) error {
			return Encode(w, NewImage(2, 2, 3), SaveOptions{Format: "gif"})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := WriteFileAtomic(tc.path, tc.write)
			if err == nil {
				t.Fatal("no error")
			}
			names := listDir(t, dir)
			if len(names) != 1 || names[0] != "keep.png" {
				t.Fatalf("folder holds %v, want only keep.png", names)
			}
			if b, _ := os.ReadFile(existing); string(b) != "old" {
				t.Fatalf("existing file now %q", b)
			}
		})
	}

	t.Run("panic", func(t *testing.T) {
		func() {
			defer func() { recover() }()
			WriteFileAtomic(filepath.Join(dir, "p.png"), func(w io.Writer) error { panic("encoder bug") })
		}()
		if names := listDir(t, dir); len(names) != 1 {
			t.Fatalf("folder holds %v after a panic", names)
		}
	})

	t.Run("path is a folder", func(t *testing.T) {
		sub := filepath.Join(dir, "sub")
		if err := os.Mkdir(sub, 0o755); err != nil {
			t.Fatal(err)
		}
		defer os.Remove(sub)
		if err := WriteFileAtomic(sub, func(w io.Writer) error { return nil }); err == nil {
			t.Fatal("replaced a folder")
		}
		if err := WriteFileAtomic(sub+string(filepath.Separator), func(w io.Writer) error { return nil }); err == nil {
			t.Fatal("wrote to a trailing-slash path")
		}
		if names := listDir(t, sub); len(names) != 0 {
			t.Fatalf("left %v in the folder", names)
		}
	})

	t.Run("parent is a file", func(t *testing.T) {
		if err := WriteFileAtomic(filepath.Join(existing, "x.png"), func(w io.Writer) error { return nil }); err == nil {
			t.Fatal("wrote below a file")
		}
	})
}
