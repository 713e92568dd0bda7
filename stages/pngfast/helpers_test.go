package pngfast

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"image"
	"image/jpeg"
	"image/png"
	"math/rand"
	"os"
	"path/filepath"
	"testing"
)

// img is a test image: rows stride bytes apart, padding filled with junk so
// that an encoder reading it would show.
type img struct {
	pix             []byte
	w, h, c, stride int
}

func (m img) row(y int) []byte { return m.pix[y*m.stride : y*m.stride+m.w*m.c] }

// packed returns the pixels without padding.
func (m img) packed() []byte {
	out := make([]byte, 0, m.w*m.h*m.c)
	for y := range m.h {
		out = append(out, m.row(y)...)
	}
	return out
}

func randomImg(rng *rand.Rand, w, h, c, pad int) img {
	m := img{pix: make([]byte, (w*c+pad)*h), w: w, h: h, c: c, stride: w*c + pad}
	rng.Read(m.pix)
	return m
}

// smoothImg is gradients plus a little noise: photo-like statistics.
func smoothImg(rng *rand.Rand, w, h, c, pad int) img {
	m := randomImg(rng, w, h, c, pad)
	for y := range h {
		r := m.row(y)
		for i := range r {
			r[i] = byte((i/c)*3 + y*2 + (i%c)*40 + rng.Intn(5))
		}
	}
	return m
}

// photos decodes the repository's sample JPEGs (real photographs) into gray
// (the grayscale stage's formula) and RGB images.
func photos(t testing.TB) (gray, rgb []img) {
	t.Helper()
	files, _ := filepath.Glob("../../samples/images/*.jpg")
	if p := os.Getenv("IMGPIPE_BENCH_PHOTO"); p != "" {
		files = []string{p}
	}
	if len(files) == 0 {
		t.Fatal("no sample photos in ../../samples/images")
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		src, err := jpeg.Decode(bytes.NewReader(data))
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		b := src.Bounds()
		g := img{pix: make([]byte, b.Dx()*b.Dy()), w: b.Dx(), h: b.Dy(), c: 1, stride: b.Dx()}
		c := img{pix: make([]byte, 3*b.Dx()*b.Dy()), w: b.Dx(), h: b.Dy(), c: 3, stride: 3 * b.Dx()}
		for y := range b.Dy() {
			for x := range b.Dx() {
				r, gg, bb, _ := src.At(b.Min.X+x, b.Min.Y+y).RGBA()
				r, gg, bb = r>>8, gg>>8, bb>>8
				c.pix[3*(y*b.Dx()+x)], c.pix[3*(y*b.Dx()+x)+1], c.pix[3*(y*b.Dx()+x)+2] = byte(r), byte(gg), byte(bb)
				g.pix[y*b.Dx()+x] = byte((9798*r + 19235*gg + 3735*bb + 16384) >> 15)
			}
		}
		gray, rgb = append(gray, g), append(rgb, c)
	}
	return gray, rgb
}

// refFiltered is §1's F, written plainly.
func refFiltered(m img) []byte {
	var f []byte
	for y := range m.h {
		r := m.row(y)
		f = append(f, 1)
		for i := range r {
			left := byte(0)
			if i >= m.c {
				left = r[i-m.c]
			}
			f = append(f, r[i]-left)
		}
	}
	return f
}

func encode(m img) []byte { return Append(nil, m.pix, m.w, m.h, m.c, m.stride) }

// decodeGo decodes with image/png and returns the packed pixels.
func decodeGo(file []byte, c int) ([]byte, error) {
	d, err := png.Decode(bytes.NewReader(file))
	if err != nil {
		return nil, err
	}
	switch d := d.(type) {
	case *image.Gray:
		if c == 1 {
			return d.Pix, nil // stride = W for a fresh decode
		}
	case *image.RGBA:
		if c == 3 {
			out := make([]byte, 0, len(d.Pix)/4*3)
			for i := 0; i < len(d.Pix); i += 4 {
				out = append(out, d.Pix[i], d.Pix[i+1], d.Pix[i+2])
			}
			return out, nil
		}
	}
	return nil, fmt.Errorf("decoded a %T for C = %d", d, c)
}

// chunk is one chunk of a PNG file.
type chunk struct {
	typ  string
	data []byte
}

// chunks splits a PNG file, checking lengths and CRCs.
func chunks(t *testing.T, file []byte) []chunk {
	t.Helper()
	if string(file[:8]) != signature {
		t.Fatalf("no PNG signature")
	}
	var out []chunk
	for p := 8; p < len(file); {
		n := int(binary.BigEndian.Uint32(file[p:]))
		typ, data := string(file[p+4:p+8]), file[p+8:p+8+n]
		if crc := binary.BigEndian.Uint32(file[p+8+n:]); crc != crc32.ChecksumIEEE(file[p+4:p+8+n]) {
			t.Fatalf("chunk %s: bad CRC", typ)
		}
		out = append(out, chunk{typ, data})
		p += 12 + n
	}
	return out
}
