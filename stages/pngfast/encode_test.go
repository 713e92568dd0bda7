package pngfast

import (
	"bytes"
	"compress/flate"
	"compress/zlib"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand"
	"strings"
	"testing"
)

// roundTrip encodes m and checks everything a reader could see: Go's
// image/png gives back the pixels, the file is within Bound, its chunks are
// IHDR, one IDAT per block and IEND with good CRCs, the zlib stream inflates
// to §1's F (zlib checks the Adler-32), and every block inflates on its own
// to its slice of F (the blocks are independent).
func roundTrip(t *testing.T, m img) []byte {
	t.Helper()
	file := encode(m)
	if b := Bound(m.w, m.h, m.c); len(file) > b {
		t.Fatalf("%d bytes, over Bound %d", len(file), b)
	}
	got, err := decodeGo(file, m.c)
	if err != nil {
		t.Fatalf("image/png: %v", err)
	}
	if !bytes.Equal(got, m.packed()) {
		t.Fatalf("image/png decodes other pixels")
	}

	cs := chunks(t, file)
	f := refFiltered(m)
	nb := (len(f) + BlockSize - 1) / BlockSize
	if len(cs) != nb+2 || cs[0].typ != "IHDR" || cs[len(cs)-1].typ != "IEND" || len(cs[len(cs)-1].data) != 0 {
		t.Fatalf("chunks %v, want IHDR, %d IDAT, IEND", chunkTypes(cs), nb)
	}
	var stream []byte
	for k, c := range cs[1 : nb+1] {
		if c.typ != "IDAT" {
			t.Fatalf("chunk %d is %s", k+1, c.typ)
		}
		stream = append(stream, c.data...)
		blk := c.data
		if k == 0 {
			if !bytes.HasPrefix(blk, []byte{0x78, 0x01}) {
				t.Fatalf("zlib header % x", blk[:2])
			}
			blk = blk[2:]
		}
		if k == nb-1 {
			blk = blk[:len(blk)-4]
		} else if !bytes.HasSuffix(blk, []byte{0, 0, 0xff, 0xff}) {
			t.Fatalf("block %d does not end with a sync flush", k)
		}
		want := f[k*BlockSize : min(len(f), (k+1)*BlockSize)]
		alone, err := io.ReadAll(flate.NewReader(bytes.NewReader(blk)))
		if k < nb-1 && errors.Is(err, io.ErrUnexpectedEOF) {
			err = nil // no final block: the reader wants more after the data
		}
		if err != nil || !bytes.Equal(alone, want) {
			t.Fatalf("block %d alone: %d bytes, err %v; want its %d bytes of F", k, len(alone), err, len(want))
		}
		if k < nb-1 && BlockBound(len(want)) < len(blk) {
			t.Fatalf("block %d: %d bytes, over BlockBound %d", k, len(blk), BlockBound(len(want)))
		}
	}
	zr, err := zlib.NewReader(bytes.NewReader(stream))
	if err != nil {
		t.Fatal(err)
	}
	inflated, err := io.ReadAll(zr)
	if err != nil || !bytes.Equal(inflated, f) {
		t.Fatalf("zlib stream: %d bytes, err %v; want F (%d bytes)", len(inflated), err, len(f))
	}
	return file
}

func chunkTypes(cs []chunk) []string {
	var s []string
	for _, c := range cs {
		s = append(s, c.typ)
	}
	return s
}

func TestRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewSource(3))
	type size struct{ w, h, c int }
	sizes := []size{
		{1, 1, 1}, {1, 1, 3}, {1, 300, 1}, {1, 300, 3}, {300, 1, 1}, {300, 1, 3},
		{17, 9, 1}, {17, 9, 3}, {33, 31, 3}, {2, 2, 1},
		// F ends exactly on a block boundary (n = 65536, 2·65536), one past
		// it (65537, only for C = 1: 65537 is prime and 1+3W never equals it),
		// and a boundary at the end of a row of several.
		{65535, 1, 1}, {65536, 1, 1}, {65535, 2, 1}, {1, 32768, 1},
		{21845, 1, 3}, {21845, 2, 3}, {255, 256, 1}, {100, 700, 3},
	}
	kinds := []struct {
		name string
		pad  int // row padding, different per kind to cover both without doubling the cases
		make func(w, h, c, pad int) img
	}{
		{"random", 5, func(w, h, c, pad int) img { return randomImg(rng, w, h, c, pad) }},
		{"smooth", 0, func(w, h, c, pad int) img { return smoothImg(rng, w, h, c, pad) }},
		{"zeros", 3, func(w, h, c, pad int) img {
			m := randomImg(rng, w, h, c, pad)
			for y := range h {
				clear(m.row(y))
			}
			return m
		}},
	}
	for _, s := range sizes {
		for _, k := range kinds {
			t.Run(fmt.Sprintf("%dx%dx%d/%s/pad%d", s.w, s.h, s.c, k.name, k.pad), func(t *testing.T) {
				roundTrip(t, k.make(s.w, s.h, s.c, k.pad))
			})
		}
	}
	gray, rgb := photos(t)
	for i, m := range append(gray, rgb...) {
		t.Run(fmt.Sprintf("photo%d/%dx%dx%d", i, m.w, m.h, m.c), func(t *testing.T) {
			roundTrip(t, m)
		})
	}
}

// TestGolden pins the bytes: a change of the format (docs/png-fast.md) fails
// here. Any such change must be made to the GPU encoder and the document too.
func TestGolden(t *testing.T) {
	lcg := func(w, h, c int, seed uint32) img {
		m := img{pix: make([]byte, w*h*c), w: w, h: h, c: c, stride: w * c}
		for i := range m.pix {
			seed = seed*1664525 + 1013904223
			m.pix[i] = byte(i%w/3) + byte(seed>>29) // a ramp with a little noise
		}
		return m
	}
	tests := []struct {
		name string
		m    img
		want string
	}{
		{"1x1 gray", lcg(1, 1, 1, 1), "536f744654e704810a92e8aa8b625ad629b4d9ae83c291a5be401ee4246962dc"},
		{"5x3 rgb", lcg(5, 3, 3, 2), "1916b99ffee58e247361dc5f5ebfb30cf24afcca9c95df269f65d2a3b297ed0e"},
		{"300x250 gray, 2 blocks", lcg(300, 250, 1, 3), "a5d90b8173b059709958d2e318932cab45c6f273977c3e1a99f3ba75fae2f7e9"},
		{"200x150 rgb, 2 blocks", lcg(200, 150, 3, 4), "5cf582e6e585a8b03fcd63d048a59be0c62996eaaf74a0cab75d930e9817bbca"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sum := sha256.Sum256(roundTrip(t, tc.m))
			if got := hex.EncodeToString(sum[:]); got != tc.want {
				t.Errorf("sha256 %s, want %s", got, tc.want)
			}
		})
	}
}

func TestBound(t *testing.T) {
	tests := []struct {
		w, h, c int
		want    int
	}{
		// 51 fixed bytes, 12 per IDAT, and per block ceil((3686 + 15·(m+1) + 7) / 8) + 4.
		{1, 1, 1, 51 + 12 + (3686+15*3+7+7)/8 + 4},
		{65535, 1, 1, 51 + 12 + (3686+15*65537+7+7)/8 + 4},
		{65536, 1, 1, 51 + 24 + (3686+15*65537+7+7)/8 + 4 + (3686+15*2+7+7)/8 + 4},
	}
	for _, tc := range tests {
		if got := Bound(tc.w, tc.h, tc.c); got != tc.want {
			t.Errorf("Bound(%d, %d, %d) = %d, want %d", tc.w, tc.h, tc.c, got, tc.want)
		}
	}
}

func TestCheck(t *testing.T) {
	tests := []struct {
		w, h, c int
		want    string
	}{
		{10, 10, 1, ""},
		{10, 10, 3, ""},
		{10, 10, 2, "2 channels"},
		{10, 10, 4, "4 channels"},
		{0, 10, 1, "0x10"},
		{10, 0, 3, "10x0"},
		{-1, 10, 1, "-1x10"},
		{math.MaxInt32 + 1, 1, 1, "2147483648x1"},
		{1, math.MaxInt32 + 1, 1, "1x2147483648"},
		{math.MaxInt32, math.MaxInt32, 3, "too large"},
	}
	for _, tc := range tests {
		err := Check(tc.w, tc.h, tc.c)
		if (tc.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("Check(%d, %d, %d) = %v, want %q", tc.w, tc.h, tc.c, err, tc.want)
		}
	}
}

func TestEncodePanicsOnBadArguments(t *testing.T) {
	pix := make([]byte, 12*10)
	dst := make([]byte, Bound(4, 10, 3))
	tests := []struct {
		name string
		call func()
		want string
	}{
		{"short dst", func() { Encode(dst[:len(dst)-1], pix, 4, 10, 3, 12) }, "want Bound"},
		{"short pix", func() { Encode(dst, pix[:len(pix)-1], 4, 10, 3, 12) }, "do not hold"},
		{"small stride", func() { Encode(dst, pix, 4, 10, 3, 11) }, "do not hold"},
		{"bad channels", func() { Encode(dst, pix, 4, 10, 2, 12) }, "2 channels"},
		{"Bound of nothing", func() { Bound(0, 1, 1) }, "0x1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			defer func() {
				r := recover()
				if r == nil || !strings.Contains(fmt.Sprint(r), tc.want) {
					t.Fatalf("panic %v, want %q", r, tc.want)
				}
			}()
			tc.call()
		})
	}
}

func TestAppendKeepsPrefix(t *testing.T) {
	m := smoothImg(rand.New(rand.NewSource(5)), 40, 30, 3, 0)
	want := encode(m)
	for _, prefix := range [][]byte{nil, []byte("abc"), make([]byte, 3, 1<<20)} {
		got := Append(prefix, m.pix, m.w, m.h, m.c, m.stride)
		if !bytes.Equal(got[:len(prefix)], prefix) || !bytes.Equal(got[len(prefix):], want) {
			t.Errorf("prefix %d (cap %d): Append changed the prefix or the file", len(prefix), cap(prefix))
		}
	}
	// Encode writes the same bytes into a dst with junk in it.
	dst := bytes.Repeat([]byte{0xa5}, Bound(m.w, m.h, m.c))
	if n := Encode(dst, m.pix, m.w, m.h, m.c, m.stride); !bytes.Equal(dst[:n], want) {
		t.Error("Encode into a dirty buffer differs")
	}
}

func TestAdler32(t *testing.T) {
	rng := rand.New(rand.NewSource(9))
	for _, n := range []int{0, 1, 7, 8, 9, adlerNMax - 1, adlerNMax, adlerNMax + 3, 3 * adlerNMax, 100000} {
		p := make([]byte, n)
		rng.Read(p)
		if n == 100000 {
			for i := range p {
				p[i] = 0xff // the largest sums
			}
		}
		a := newAdler32()
		a.update(p[:n/3])
		a.update(p[n/3:])
		if got, want := a.sum(), refAdler(p); got != want {
			t.Errorf("n=%d: %08x, want %08x", n, got, want)
		}
	}
}

// refAdler is RFC 1950's definition, one byte at a time.
func refAdler(p []byte) uint32 {
	s1, s2 := uint32(1), uint32(0)
	for _, b := range p {
		s1 = (s1 + uint32(b)) % 65521
		s2 = (s2 + s1) % 65521
	}
	return s2<<16 | s1
}

func TestSubFilterMatchesScalar(t *testing.T) {
	rng := rand.New(rand.NewSource(11))
	for _, c := range []int{1, 3} {
		for _, w := range []int{1, 2, 3, 5, 8, 9, 16, 17, 100} {
			m := randomImg(rng, w, 3, c, 2)
			want := refFiltered(m)
			// Fill F in pieces of every length from 1 up, so that blocks
			// cut rows anywhere.
			for piece := 1; piece <= 11; piece++ {
				cur := filterCursor{pix: m.pix, w: m.w, h: m.h, c: c, stride: m.stride}
				var got []byte
				var hist [4][256]uint32
				var counts [256]uint32
				for len(got) < len(want) {
					p := make([]byte, min(piece, len(want)-len(got)))
					cur.fill(p, &hist)
					for s := range 256 {
						counts[s] += hist[0][s] + hist[1][s] + hist[2][s] + hist[3][s]
					}
					got = append(got, p...)
				}
				var wantCounts [256]uint32
				for _, v := range want {
					wantCounts[v]++
				}
				if !bytes.Equal(got, want) || counts != wantCounts {
					t.Fatalf("C=%d W=%d pieces of %d: F or its counts differ", c, w, piece)
				}
			}
		}
	}
}

func TestHeaderFieldsOfFirstChunk(t *testing.T) {
	file := encode(randomImg(rand.New(rand.NewSource(1)), 7, 4, 3, 0))
	ihdr := chunks(t, file)[0].data
	if w, h := binary.BigEndian.Uint32(ihdr), binary.BigEndian.Uint32(ihdr[4:]); w != 7 || h != 4 || !bytes.Equal(ihdr[8:], []byte{8, 2, 0, 0, 0}) {
		t.Errorf("IHDR % x", ihdr)
	}
}

// TestLiteralsAfterPendingBits packs literals after every count of bits a
// block header can leave pending (0 to 31), on both of the packer's paths
// (codes of at most 14 bits, and of 15), and reads each code back.
func TestLiteralsAfterPendingBits(t *testing.T) {
	rng := rand.New(rand.NewSource(5))
	for _, longest := range []uint8{14, 15} {
		for pending := range uint(32) {
			t.Run(fmt.Sprintf("longest%d/pending%d", longest, pending), func(t *testing.T) {
				e := new(encoder)
				for s := range 256 {
					l := uint8(8)
					if s < 8 {
						l = longest // the block starts with its longest codes
					}
					e.litL[s] = l
					e.lit[s] = uint32(rng.Intn(1<<l)) | uint32(l)<<16
				}
				blk := make([]byte, 103)
				for i := range blk {
					blk[i] = byte(rng.Intn(8))
					if i > 20 && rng.Intn(2) == 0 {
						blk[i] = byte(rng.Intn(256))
					}
				}
				head := uint32(rng.Int63()) & (1<<pending - 1)
				e.bw = bitWriter{dst: make([]byte, 512)}
				e.bw.write(head, pending)
				e.literals(blk)
				e.bw.align()

				r := bitReader{p: e.bw.dst[:e.bw.pos]}
				if got := uint32(r.bits(int(pending))); got != head {
					t.Fatalf("pending bits %#x, want %#x", got, head)
				}
				for i, b := range blk {
					c := e.lit[b]
					if got := uint32(r.bits(int(c >> 16))); got != c&0xffff {
						t.Fatalf("literal %d (%d): code %#x, want %#x", i, b, got, c&0xffff)
					}
				}
			})
		}
	}
}
