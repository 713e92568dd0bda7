package main

// Test helpers shared by the CLI's tests: random photos in every format, folders of
// them, and readers for what a run leaves behind.

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"hash/crc32"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"io/fs"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/imgpipe/imgpipe/pipeline"
)

// photo is a random-ish w×h RGB picture.
func photo(rng *rand.Rand, w, h int) image.Image {
	m := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			m.Set(x, y, color.RGBA{uint8(x * 255 / w), uint8(y * 255 / h), uint8(rng.Intn(256)), 255})
		}
	}
	return m
}

func pngBytes(t *testing.T, m image.Image) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := png.Encode(&b, m); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func jpegBytes(t *testing.T, m image.Image) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := jpeg.Encode(&b, m, &jpeg.Options{Quality: 85}); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// hugeHeaderPNG is a tiny PNG whose header claims w×h pixels (with a valid CRC), as a
// hostile file would.
func hugeHeaderPNG(t *testing.T, w, h uint32) []byte {
	b := pngBytes(t, image.NewGray(image.Rect(0, 0, 1, 1)))
	ihdr := b[8+8 : 8+8+13] // after the signature and IHDR's length and type
	binary.BigEndian.PutUint32(ihdr[0:], w)
	binary.BigEndian.PutUint32(ihdr[4:], h)
	binary.BigEndian.PutUint32(b[8+8+13:], crc32.ChecksumIEEE(b[8+4:8+8+13]))
	return b
}

func write(t *testing.T, dir, name string, data []byte) {
	t.Helper()
	p := filepath.Join(dir, filepath.FromSlash(name))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// mixedFolder makes a folder of good images and hostile files; it returns the good names
// and the bad ones with the start of their expected error.
func mixedFolder(t *testing.T) (dir string, good []string, bad map[string]string) {
	t.Helper()
	dir = t.TempDir()
	rng := rand.New(rand.NewSource(1))
	good = []string{"a.png", "b.jpg", "nested/c.png", "nested/deeper/d.JPG", "big-but-ok.png"}
	write(t, dir, "a.png", pngBytes(t, photo(rng, 40, 30)))
	write(t, dir, "b.jpg", jpegBytes(t, photo(rng, 33, 17)))
	write(t, dir, "nested/c.png", pngBytes(t, photo(rng, 1, 1)))
	write(t, dir, "nested/deeper/d.JPG", jpegBytes(t, photo(rng, 64, 9)))
	write(t, dir, "big-but-ok.png", pngBytes(t, image.NewGray(image.Rect(0, 0, 500, 400))))
	trunc := jpegBytes(t, photo(rng, 50, 50))
	bad = map[string]string{
		"truncated.jpg":    "decode: ",
		"zero.png":         "decode: empty file",
		"text.jpg":         "decode: unknown image format",
		"too-big.png":      "decode: image is 1000x1000 (1.0 MP), over the 0.3 MP limit",
		"hostile-hdr.png":  "decode: image is 60000x60000 (3600.0 MP), over the 0.3 MP limit",
		"nested/trunc.png": "decode: ",
	}
	write(t, dir, "truncated.jpg", trunc[:len(trunc)/2])
	write(t, dir, "zero.png", nil)
	write(t, dir, "text.jpg", []byte("this is not a picture\n"))
	write(t, dir, "too-big.png", pngBytes(t, image.NewGray(image.Rect(0, 0, 1000, 1000))))
	write(t, dir, "hostile-hdr.png", hugeHeaderPNG(t, 60000, 60000))
	p := pngBytes(t, photo(rng, 20, 20))
	write(t, dir, "nested/trunc.png", p[:len(p)-30])
	write(t, dir, "notes.txt", []byte("ignored: not an image extension"))
	return dir, good, bad
}

const chain = "decode max_pixels=300000 backend=go | grayscale | blur sigma=1.5 | transpose | histogram | save format=png"

func readReport(t *testing.T, path string) ([]pipeline.ReportLine, pipeline.Summary) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	var out []pipeline.ReportLine
	for _, l := range lines[:len(lines)-1] {
		var rl pipeline.ReportLine
		if err := json.Unmarshal([]byte(l), &rl); err != nil {
			t.Fatalf("report line %q: %v", l, err)
		}
		out = append(out, rl)
	}
	var s struct{ Summary *pipeline.Summary }
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &s); err != nil || s.Summary == nil {
		t.Fatalf("last report line %q is not a summary (%v)", lines[len(lines)-1], err)
	}
	return out, *s.Summary
}

// files lists every file under dir (slash paths), failing on temporary leftovers.
func files(t *testing.T, dir string) map[string]fs.FileInfo {
	t.Helper()
	out := map[string]fs.FileInfo{}
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if strings.Contains(d.Name(), ".tmp") {
			t.Errorf("temporary file left: %s", rel)
		}
		fi, _ := d.Info()
		out[filepath.ToSlash(rel)] = fi
		return nil
	})
	return out
}
