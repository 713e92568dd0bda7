package jpegdec

import (
	"bytes"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// readFile reads a fixture: testdata/... is this package's, anything else is in the
// repository's stages/testdata.
func readFile(t testing.TB, name string) []byte {
	t.Helper()
	if !strings.HasPrefix(name, "testdata/") {
		name = filepath.Join("..", "..", "stages", "testdata", name)
	}
	d, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// goJPEG encodes a w x h picture with Go's encoder (baseline, 4:2:0 YCbCr or grayscale,
// no JFIF marker): smooth gradients plus noise, so that the scan holds stuffed 0xFF bytes.
func goJPEG(t testing.TB, w, h int, gray bool, quality int) []byte {
	t.Helper()
	rng := rand.New(rand.NewPCG(uint64(w), uint64(h)))
	px := func(x, y int, phase float64) uint8 {
		v := 128 + 90*math.Sin(float64(x)/37+phase)*math.Cos(float64(y)/23-phase) + rng.NormFloat64()*12
		return uint8(max(0, min(255, v)))
	}
	var img image.Image
	if gray {
		g := image.NewGray(image.Rect(0, 0, w, h))
		for y := range h {
			for x := range w {
				g.SetGray(x, y, color.Gray{px(x, y, 0)})
			}
		}
		img = g
	} else {
		c := image.NewRGBA(image.Rect(0, 0, w, h))
		for y := range h {
			for x := range w {
				c.SetRGBA(x, y, color.RGBA{px(x, y, 0), px(x, y, 1), px(x, y, 2), 255})
			}
		}
		img = c
	}
	var buf bytes.Buffer
	if err := jpeg.Encode(&buf, img, &jpeg.Options{Quality: quality}); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// seg is one marker segment of a file: d[off:end] holds 0xFF, the marker, the length and the body.
type seg struct {
	m        byte
	off, end int
}

// segs lists a well-formed file's segments after SOI, through SOS (the scan follows it).
func segs(d []byte) []seg {
	var out []seg
	for p := 2; p+4 <= len(d) && d[p] == 0xFF; {
		s := seg{d[p+1], p, p + 2 + (int(d[p+2])<<8 | int(d[p+3]))}
		out = append(out, s)
		if p = s.end; s.m == mSOS {
			break
		}
	}
	return out
}

func cat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

func segment(m byte, body []byte) []byte {
	return cat([]byte{0xFF, m, byte((len(body) + 2) >> 8), byte(len(body) + 2)}, body)
}

// rewrite returns d with its nth segment of marker m given the body f makes of a copy of
// the old one (nil: the segment goes).
func rewrite(d []byte, m byte, nth int, f func(b []byte) []byte) []byte {
	for _, s := range segs(d) {
		if s.m != m {
			continue
		}
		if nth--; nth < 0 {
			var repl []byte
			if b := f(bytes.Clone(d[s.off+4 : s.end])); b != nil {
				repl = segment(m, b)
			}
			return cat(d[:s.off], repl, d[s.end:])
		}
	}
	panic(fmt.Sprintf("no segment FF%02X", m))
}

// insertAt puts raw in before the first segment of marker m.
func insertAt(d []byte, m byte, raw []byte) []byte {
	for _, s := range segs(d) {
		if s.m == m {
			return cat(d[:s.off], raw, d[s.off:])
		}
	}
	panic(fmt.Sprintf("no segment FF%02X", m))
}

// scanEdit returns d with f applied to its scan (between the SOS header and the final EOI).
func scanEdit(d []byte, f func(scan []byte) []byte) []byte {
	ss := segs(d)
	start, end := ss[len(ss)-1].end, len(d)-2
	return cat(d[:start], f(bytes.Clone(d[start:end])), d[end:])
}

// readSeg returns the first segment of marker m, marker and length included.
func readSeg(d []byte, m byte) []byte {
	for _, s := range segs(d) {
		if s.m == m {
			return bytes.Clone(d[s.off:s.end])
		}
	}
	panic(fmt.Sprintf("no segment FF%02X", m))
}

// set returns b with b[kv[0]] = kv[1], b[kv[2]] = kv[3], ...
func set(b []byte, kv ...int) []byte {
	for i := 0; i < len(kv); i += 2 {
		b[kv[i]] = byte(kv[i+1])
	}
	return b
}

func shape(f *Frame) string {
	return fmt.Sprintf("%dx%d %dx%d mcus %dx%d ri %d segs %d", f.Width, f.Height, f.Comps[0].H, f.Comps[0].V,
		f.MCUsX, f.MCUsY, f.Restart, len(f.SegEnds))
}

type parseCase struct {
	name  string
	data  []byte // nil: the fixture of that name
	err   string // "" when Parse takes the file; else part of its error
	shape string // the Frame's shape (see shape), where given
	same  string // an earlier case whose Frame and scan this one must give too
	warns bool   // djpeg warns about the file, with a warning the project counts as harmless
}

func parseCases(t testing.TB) []parseCase {
	go420, gray := goJPEG(t, 61, 37, false, 90), goJPEG(t, 61, 37, true, 90)
	var flat bytes.Buffer // 64 MCUs in a few bytes
	if err := jpeg.Encode(&flat, image.NewGray(image.Rect(0, 0, 64, 64)), nil); err != nil {
		t.Fatal(err)
	}
	rst := readFile(t, "testdata/rst420.jpg")
	if !bytes.Contains(go420[readSegOff(go420, mSOS):], []byte{0xFF, 0}) {
		t.Fatal("the Go file's scan has no stuffed 0xFF to test with")
	}
	adobe := func(transform int) []byte {
		return segment(mAPP14, []byte{'A', 'd', 'o', 'b', 'e', 0, 100, 0, 0, 0, 0, byte(transform)})
	}
	jfif := segment(mAPP0, []byte{'J', 'F', 'I', 'F', 0, 1, 1, 0, 0, 1, 0, 1, 0, 0})
	edit := func(d []byte, m byte, kv ...int) []byte {
		return rewrite(d, m, 0, func(b []byte) []byte { return set(b, kv...) })
	}
	// Go's SOF body: P, H, W, Nf, then id, HV, Tq per component from byte 6; its SOS body:
	// Ns, then id, TdTa per component from byte 1, then Ss, Se, AhAl; its one DHT segment
	// starts with the DC 0 table (class/index, 16 counts, symbols).
	ids := func(d []byte, a, b, c int) []byte {
		return edit(edit(d, mSOF0, 6, a, 9, b, 12, c), mSOS, 1, a, 3, b, 5, c)
	}
	marker := func(d []byte, from, to byte) []byte { return set(bytes.Clone(d), readSegOff(d, from)+1, int(to)) }
	beforeEOI := func(d, raw []byte) []byte { return cat(d[:len(d)-2], raw, d[len(d)-2:]) }
	inScan := func(d []byte, old, new []byte) []byte {
		return scanEdit(d, func(s []byte) []byte { return bytes.ReplaceAll(s, old, new) })
	}
	last := func(d []byte) seg { ss := segs(d); return ss[len(ss)-1] }
	return []parseCase{
		{name: "sub444", shape: "23x13 1x1 mcus 3x2 ri 0 segs 1"},
		{name: "sub422", shape: "23x13 2x1 mcus 2x2 ri 0 segs 1"},
		{name: "sub420", shape: "23x13 2x2 mcus 2x1 ri 0 segs 1"},
		{name: "sub440", shape: "23x13 1x2 mcus 3x1 ri 0 segs 1"},
		{name: "sub411", shape: "23x13 4x1 mcus 1x2 ri 0 segs 1"},
		{name: "orient_1", shape: "24x16 2x2 mcus 2x1 ri 0 segs 1"},
		{name: "orient_2"}, {name: "orient_3"}, {name: "orient_4"}, {name: "orient_5"},
		{name: "orient_6"}, {name: "orient_7"}, {name: "orient_8"}, {name: "orient_3_le"}, {name: "orient_6_le"},
		{name: "sub410", err: "sampling 4x2,1x1,1x1"},
		{name: "progressive", err: "progressive (SOF2)"},
		{name: "progressive_gray", err: "progressive (SOF2)"},
		{name: "cmyk", err: "4 components"},
		{name: "arith/arith420", err: "arithmetic coding (SOF9)"},
		{name: "arith/arith_progressive", err: "arithmetic coding (SOF10)"},
		{name: "testdata/rst420", shape: "96x64 2x2 mcus 6x4 ri 1 segs 24"},
		{name: "testdata/rst422", shape: "50x30 2x1 mcus 4x4 ri 4 segs 4"},
		{name: "testdata/rst411", shape: "70x20 4x1 mcus 3x3 ri 4 segs 3"},
		{name: "testdata/rst440", shape: "30x50 1x2 mcus 4x4 ri 3 segs 6"},
		{name: "testdata/rst444", shape: "16x16 1x1 mcus 2x2 ri 10 segs 1"},
		{name: "testdata/rst_gray", shape: "37x21 1x1 mcus 5x3 ri 2 segs 8"},

		// Go's encoder, and byte-level edits of its files
		{name: "go 4:2:0", data: go420, shape: "61x37 2x2 mcus 4x3 ri 0 segs 1"},
		{name: "go gray", data: gray, shape: "61x37 1x1 mcus 8x5 ri 0 segs 1"},
		{name: "gray with 2x2 factors", data: edit(gray, mSOF0, 7, 0x22), same: "go gray"},
		{name: "SOF1", data: marker(go420, mSOF0, mSOF1), same: "go 4:2:0"},
		{name: "16-bit DQT", data: wideDQT(go420), same: "go 4:2:0"},
		{name: "Adobe transform 1", data: insertAt(go420, mDQT, adobe(1)), same: "go 4:2:0"},
		{name: "Adobe transform 2", data: insertAt(go420, mDQT, adobe(2)), same: "go 4:2:0", warns: true},
		{name: "Adobe transform 0", data: insertAt(go420, mDQT, adobe(0)), err: "RGB colour space"},
		{name: "JFIF, Adobe transform 0", data: insertAt(go420, mDQT, cat(jfif, adobe(0))), same: "go 4:2:0"},
		{name: "short JFIF, Adobe transform 0", data: insertAt(go420, mDQT, cat(segment(mAPP0, []byte("JFIF\x00")), adobe(0))), err: "RGB colour space"},
		{name: "ids R G B", data: ids(go420, 'R', 'G', 'B'), err: "RGB colour space"},
		{name: "ids R G B with JFIF", data: insertAt(ids(go420, 'R', 'G', 'B'), mDQT, jfif), same: "go 4:2:0"},
		{name: "ids 1 34 35", data: ids(go420, 1, 34, 35), same: "go 4:2:0"},
		{name: "ids 1 1 1", data: ids(go420, 1, 1, 1), same: "go 4:2:0"},
		{name: "scan order 2 1 3", data: edit(go420, mSOS, 1, 2, 3, 1), err: "frame order"},
		{name: "scan of one component", data: rewrite(go420, mSOS, 0, func([]byte) []byte { return []byte{1, 1, 0, 0, 63, 0} }), err: "a scan of 1 of the 3 components"},
		{name: "two components", data: rewrite(go420, mSOF0, 0, func(b []byte) []byte { return set(b[:12], 5, 2) }), err: "2 components"},
		{name: "chroma 2x2", data: edit(go420, mSOF0, 10, 0x22), err: "sampling 2x2,2x2,1x1"},
		{name: "4:4:1", data: edit(go420, mSOF0, 7, 0x14), err: "sampling 1x4,1x1,1x1"},
		{name: "4:4:4 as 2x1 each", data: edit(go420, mSOF0, 7, 0x21, 10, 0x21, 13, 0x21), err: "sampling 2x1,2x1,2x1"},
		{name: "4:2:2 as 2x2 and 1x2", data: edit(go420, mSOF0, 10, 0x12, 13, 0x12), err: "sampling 2x2,1x2,1x2"},
		{name: "sampling factor 0", data: edit(go420, mSOF0, 7, 0x02), err: "sampling factors 0x2"},
		{name: "gray sampling factor 5", data: edit(gray, mSOF0, 7, 0x51), err: "sampling factors 5x1"},
		{name: "12-bit", data: edit(go420, mSOF0, 0, 12), err: "12-bit samples"},
		{name: "height 0", data: edit(go420, mSOF0, 1, 0, 2, 0), err: "height 0"},
		{name: "width 65501", data: edit(go420, mSOF0, 3, 0xFF, 4, 0xDD), err: "65501x37 is over libjpeg's 65500"},
		{name: "SOF2", data: marker(go420, mSOF0, mSOF2), err: "progressive (SOF2)"},
		{name: "SOF3", data: marker(go420, mSOF0, 0xC3), err: "lossless or hierarchical JPEG (SOF3)"},
		{name: "SOF5", data: marker(go420, mSOF0, 0xC5), err: "lossless or hierarchical JPEG (SOF5)"},
		{name: "second SOF", data: insertAt(go420, mDHT, readSeg(go420, mSOF0)), err: "second frame header"},
		{name: "DAC", data: insertAt(go420, mSOS, segment(mDAC, []byte{0x00, 0x10})), err: "arithmetic conditioning (DAC)"},
		{name: "unknown marker", data: insertAt(go420, mSOS, segment(0x02, nil)), err: "unknown marker FF02"},
		{name: "DHP", data: insertAt(go420, mSOS, segment(0xDE, nil)), err: "unknown marker FFDE"},
		{name: "no SOI", data: go420[2:], err: "no SOI"},
		{name: "fill before SOI", data: cat([]byte{0xFF}, go420), err: "no SOI"},
		{name: "second SOI", data: insertAt(go420, mDQT, []byte{0xFF, mSOI}), err: "second SOI"},
		{name: "EOI before the scan", data: []byte{0xFF, mSOI, 0xFF, mEOI}, err: "EOI before any scan"},
		{name: "SOS before SOF", data: insertAt(go420, mSOF0, readSeg(go420, mSOS)), err: "SOS before SOF"},
		{name: "no quantisation table", data: edit(go420, mSOF0, 8, 3), err: "no quantisation table 3"},
		{name: "no DC table 1 (standard)", data: edit(gray, mSOS, 2, 0x10), err: "no DC Huffman table 1 (libjpeg-turbo would use the standard one)"},
		{name: "no AC table 2", data: edit(gray, mSOS, 2, 0x02), err: "no AC Huffman table 2"},
		{name: "AC table 5", data: edit(gray, mSOS, 2, 0x05), err: "no AC Huffman table 5"},
		{name: "Se 0", data: edit(go420, mSOS, 8, 0), err: "not sequential"},
		{name: "Al 1", data: edit(go420, mSOS, 9, 1), err: "not sequential"},
		{name: "SOS length", data: rewrite(go420, mSOS, 0, func(b []byte) []byte { return b[:9] }), err: "SOS segment of 11 bytes"},
		{name: "DC code space overfull", data: edit(go420, mDHT, 1, 1, 9, 0), err: "overfill"},
		{name: "DC code all ones", data: edit(go420, mDHT, 8, 2, 9, 0), err: "overfill"},
		{name: "DC symbol 16", data: edit(go420, mDHT, 17, 16), err: "DC Huffman symbol 16"},
		{name: "DHT of 522 symbols", data: edit(go420, mDHT, 15, 255, 16, 255), err: "DHT table of 522 symbols"},
		{name: "DHT class 2", data: edit(go420, mDHT, 0, 0x20), err: "DHT table class/index 0x20"},
		{name: "DHT index 4", data: edit(go420, mDHT, 0, 0x04), err: "DHT table class/index 0x04"},
		{name: "DHT left over", data: rewrite(go420, mDHT, 0, func(b []byte) []byte { return append(b, 0, 0) }), err: "DHT segment has 2 bytes left over"},
		{name: "DQT index 4", data: edit(go420, mDQT, 0, 4), err: "DQT table 4"},
		{name: "DQT short", data: rewrite(go420, mDQT, 0, func(b []byte) []byte { return b[:100] }), err: "DQT segment shorter"},
		{name: "DRI length 5", data: insertAt(go420, mSOS, segment(mDRI, []byte{0, 1, 0})), err: "DRI has length 5"},
		{name: "stray bytes before a marker", data: insertAt(go420, mDQT, []byte{0x12, 0xFF, 0x00, 0x34}), same: "go 4:2:0", warns: true},
		{name: "fill bytes before markers", data: insertAt(cat(go420[:readSegOff(go420, mSOS)], []byte{0xFF}, go420[readSegOff(go420, mSOS):]), mDQT, []byte{0xFF, 0xFF}), same: "go 4:2:0"},
		{name: "RST and TEM before the scan", data: insertAt(go420, mDQT, []byte{0xFF, mRST0 + 5, 0xFF, mTEM}), same: "go 4:2:0"},
		{name: "DNL before the scan", data: insertAt(go420, mSOS, segment(mDNL, []byte{0, 37})), same: "go 4:2:0"},
		{name: "APP3 of length 0", data: insertAt(go420, mDQT, []byte{0xFF, 0xE3, 0, 0}), same: "go 4:2:0"},
		{name: "FF FF 00 in the scan", data: inScan(go420, []byte{0xFF, 0}, []byte{0xFF, 0xFF, 0xFF, 0}), same: "go 4:2:0"},
		{name: "FF fill before EOI", data: beforeEOI(go420, []byte{0xFF, 0xFF}), same: "go 4:2:0"},
		{name: "bytes after EOI", data: cat(go420, []byte("junk\xFF\xD8")), same: "go 4:2:0"},
		{name: "COM after the scan", data: beforeEOI(go420, segment(mCOM, []byte("hi"))), err: "marker FFFE after the scan"},
		{name: "DNL after the scan", data: beforeEOI(go420, segment(mDNL, []byte{0, 37})), err: "marker FFDC after the scan"},
		{name: "second scan", data: beforeEOI(go420, readSeg(go420, mSOS)), err: "marker FFDA after the scan"},
		{name: "FF fill before RST", data: inScan(rst, []byte{0xFF, 0xD3}, []byte{0xFF, 0xFF, 0xFF, 0xD3}), same: "testdata/rst420"},
		{name: "RST without DRI", data: rewrite(rst, mDRI, 0, func([]byte) []byte { return nil }), err: "restart marker RST0 without DRI"},
		{name: "RST out of order", data: scanEdit(rst, func(s []byte) []byte { return set(s, bytes.Index(s, []byte{0xFF, 0xD1})+1, 0xD2) }), err: "RST2 where RST1 belongs"},
		{name: "RST missing", data: scanEdit(rst, func(s []byte) []byte { i := bytes.LastIndex(s, []byte{0xFF, 0xD6}); return cat(s[:i], s[i+2:]) }), err: "23 restart intervals, where DRI 1 asks for 24"},
		{name: "RST at the end", data: beforeEOI(rst, []byte{0xFF, 0xD7}), err: "more than 24 restart intervals"},
		{name: "empty restart segment", data: inScan(rst, []byte{0xFF, 0xD1}, []byte{0xFF, 0xD1, 0xFF, 0xD2}), err: "restart segment 2 is empty"},
		{name: "DRI 2 for RSTs of 1", data: edit(rst, mDRI, 1, 2), err: "more than 12 restart intervals"},
		{name: "DRI 1 without RSTs", data: insertAt(go420, mSOS, segment(mDRI, []byte{0, 1})), err: "1 restart intervals, where DRI 1 asks for 12"},
		{name: "DRI 1 over a tiny scan", data: insertAt(flat.Bytes(), mSOS, segment(mDRI, []byte{0, 1})), err: "DRI 1 asks for 63 restart markers"},
		{name: "truncated in DHT", data: go420[:segs(go420)[2].off+30], err: "ends inside marker FFC4's segment"},
		{name: "truncated in a length", data: go420[:segs(go420)[1].off+3], err: "ends in the length of marker FFC0"},
		{name: "truncated after SOS", data: go420[:last(go420).end], err: "ends inside the scan"},
		{name: "truncated in the scan", data: go420[:len(go420)-40], err: "ends inside the scan"},
		{name: "no EOI", data: go420[:len(go420)-2], err: "ends inside the scan"},
		{name: "half an EOI", data: go420[:len(go420)-1], err: "ends inside a marker"},
	}
}

// readSegOff returns the offset of the first segment of marker m.
func readSegOff(d []byte, m byte) int {
	for _, s := range segs(d) {
		if s.m == m {
			return s.off
		}
	}
	panic(fmt.Sprintf("no segment FF%02X", m))
}

// wideDQT rewrites Go's one DQT segment (two 8-bit tables) with 16-bit tables.
func wideDQT(d []byte) []byte {
	return rewrite(d, mDQT, 0, func(b []byte) []byte {
		var w []byte
		for ; len(b) >= 65; b = b[65:] {
			w = append(w, 0x10|b[0])
			for _, v := range b[1:65] {
				w = append(w, 0, v)
			}
		}
		return w
	})
}

type parsed struct {
	f    *Frame
	scan []byte
}

func TestParse(t *testing.T) {
	done := map[string]parsed{}
	for _, c := range parseCases(t) {
		t.Run(c.name, func(t *testing.T) {
			data := c.data
			if data == nil {
				data = readFile(t, c.name+".jpg")
			}
			f, out, err := Parse(data, []byte("prefix"))
			if c.err != "" {
				if !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("err = %v, want ErrUnsupported with %q", err, c.err)
				}
				if f != nil || string(out) != "prefix" {
					t.Errorf("after an error: frame %v, dst %q", f, out)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.HasPrefix(out, []byte("prefix")) {
				t.Fatalf("dst's prefix is gone: %q", out[:6])
			}
			scan := out[6:]
			if c.shape != "" && shape(f) != c.shape {
				t.Errorf("shape %q, want %q", shape(f), c.shape)
			}
			if len(f.SegEnds) == 0 || f.SegEnds[len(f.SegEnds)-1] != len(scan) {
				t.Errorf("SegEnds %v end off the %d scan bytes", f.SegEnds, len(scan))
			}
			if c.same != "" {
				p := done[c.same]
				if !reflect.DeepEqual(f, p.f) || !bytes.Equal(scan, p.scan) {
					t.Errorf("Frame or scan differs from %s's", c.same)
				}
			}
			done[c.name] = parsed{f, scan}
			dc, lw, err := refDecode(f, scan)
			if err != nil {
				t.Fatal(err)
			}
			t.Run("djpeg", func(t *testing.T) { compareDjpeg(t, data, f, dc, lw, c.warns) })
		})
	}
}

// TestQuantOrder: DQT values come in zigzag order and Quant holds them row by row, from
// 8-bit and 16-bit tables alike.
func TestQuantOrder(t *testing.T) {
	d := goJPEG(t, 16, 16, false, 90)
	d = rewrite(d, mDQT, 0, func(b []byte) []byte {
		b = append(b[:65], make([]byte, 1+128)...)
		b[65] = 0x11 // table 1, 16-bit
		for i := range 64 {
			b[1+i] = byte(1 + i)
			b[66+2*i], b[67+2*i] = byte((1000+i)>>8), byte(1000+i)
		}
		return b
	})
	f, _, err := Parse(d, nil)
	if err != nil {
		t.Fatal(err)
	}
	// the zigzag positions of row 0, and of column 0
	row0, col0 := []int{0, 1, 5, 6, 14, 15, 27, 28}, []int{0, 2, 3, 9, 10, 20, 21, 35}
	for i := range 8 {
		for c, base := range []int{1, 1000, 1000} {
			if q := f.Comps[c].Quant; int(q[i]) != base+row0[i] || int(q[8*i]) != base+col0[i] {
				t.Errorf("component %d: Quant[%d] = %d, Quant[%d] = %d; want %d, %d", c, i, q[i], 8*i, q[8*i], base+row0[i], base+col0[i])
			}
		}
	}
}

// TestParseInPlace: dst grows in place when it has room, as cudastage's staging buffer needs.
func TestParseInPlace(t *testing.T) {
	data := readFile(t, "testdata/rst420.jpg")
	buf := make([]byte, 5, 5+len(data))
	_, out, err := Parse(data, buf)
	if err != nil {
		t.Fatal(err)
	}
	if &out[0] != &buf[0] {
		t.Error("Parse reallocated a dst with room for the file")
	}
}

// TestBuild: the tables of JPEG Annex K's luminance DC table, and jdhuff.c's refusals.
func TestBuild(t *testing.T) {
	lumDC := [17]uint8{0, 0, 1, 5, 1, 1, 1, 1, 1, 1}
	for _, c := range []struct {
		name   string
		bits   [17]uint8
		dc     bool
		err    string
		lookup map[int]uint16 // Lookup index: entry
		max    [18]int32
		off    [18]int32
	}{
		{name: "luminance DC", bits: lumDC, dc: true,
			lookup: map[int]uint16{0: 0x200, 127: 0x200, 128: 0x301, 0b110_000000: 0x305, 0b1110_00000: 0x406,
				0b11111110_0: 0x80a, 0b11111110_1: 0x80a, 0b111111110: 0x90b, 0b111111111: 0},
			max: [18]int32{-1, -1, 0, 6, 14, 30, 62, 126, 254, 510, -1, -1, -1, -1, -1, -1, -1, 0x7fffffff},
			off: [18]int32{0, 0, 0, -1, -8, -23, -54, -117, -244, -499}},
		{name: "long codes", bits: [17]uint8{1: 1, 16: 200},
			lookup: map[int]uint16{0: 0x100, 255: 0x100, 256: 0, 511: 0},
			max:    [18]int32{-1, 0, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 0x8000 + 199, 0x7fffffff},
			off:    [18]int32{1: 0, 16: 1 - 0x8000}},
		{name: "256 symbols", bits: [17]uint8{8: 255, 9: 1},
			lookup: map[int]uint16{0: 0x800, 1: 0x800, 509: 0x8fe, 510: 0x9ff, 511: 0},
			max:    [18]int32{-1, -1, -1, -1, -1, -1, -1, -1, 254, 510, -1, -1, -1, -1, -1, -1, -1, 0x7fffffff},
			off:    [18]int32{8: 0, 9: 255 - 510}},
		{name: "all ones", bits: [17]uint8{1: 1, 2: 1, 3: 2}, err: "overfill"},
		{name: "overfull", bits: [17]uint8{1: 3}, err: "overfill"},
		{name: "257 codes", bits: [17]uint8{9: 255, 10: 2}, err: "over 256"},
		{name: "no codes", err: "without codes"},
		{name: "DC symbol 16", bits: [17]uint8{5: 17}, dc: true, err: "DC Huffman symbol 16"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := huffSpec{set: true, bits: c.bits}
			for i := range s.vals {
				s.vals[i] = byte(i)
			}
			var tab Table
			err := tab.build(&s, c.dc)
			if c.err != "" {
				if !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("err = %v, want ErrUnsupported with %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for i, want := range c.lookup {
				if tab.Lookup[i] != want {
					t.Errorf("Lookup[%#b] = %#x, want %#x", i, tab.Lookup[i], want)
				}
			}
			if tab.MaxCode != c.max || tab.ValOff != c.off {
				t.Errorf("MaxCode %v\nValOff %v\nwant %v\n%v", tab.MaxCode, tab.ValOff, c.max, c.off)
			}
			if tab.Values != s.vals {
				t.Error("Values differ from the DHT's symbols")
			}
		})
	}
}

// FuzzParse: Parse never panics, every error wraps ErrUnsupported, and a Frame it returns
// is self-consistent.
func FuzzParse(f *testing.F) {
	for _, c := range parseCases(f) {
		if c.data == nil {
			c.data = readFile(f, c.name+".jpg")
		}
		f.Add(c.data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		fr, out, err := Parse(data, nil)
		if err != nil {
			if !errors.Is(err, ErrUnsupported) || len(out) != 0 {
				t.Fatalf("err %v, %d bytes out", err, len(out))
			}
			return
		}
		nseg := 1
		if fr.Restart > 0 {
			nseg = (fr.MCUsX*fr.MCUsY + fr.Restart - 1) / fr.Restart
		}
		if len(fr.SegEnds) != nseg || fr.SegEnds[nseg-1] != len(out) || len(out) >= len(data) {
			t.Fatalf("%d segments ending %v of %d bytes from %d", nseg, fr.SegEnds, len(out), len(data))
		}
		for i := 1; i < nseg; i++ {
			if fr.SegEnds[i] <= fr.SegEnds[i-1] {
				t.Fatalf("SegEnds %v", fr.SegEnds)
			}
		}
		for _, c := range fr.Comps {
			if c.DC >= len(fr.Tables) || c.AC >= len(fr.Tables) {
				t.Fatalf("component tables %d, %d of %d", c.DC, c.AC, len(fr.Tables))
			}
		}
	})
}

// BenchmarkParse parses a 1920x1080 camera-like JPEG (smooth, with noise; Go's encoder at
// quality 90) into a reused buffer.
func BenchmarkParse(b *testing.B) {
	data := goJPEG(b, 1920, 1080, false, 90)
	buf := make([]byte, 0, len(data))
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		_, out, err := Parse(data, buf[:0])
		if err != nil {
			b.Fatal(err)
		}
		buf = out
	}
}
