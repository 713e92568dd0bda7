package jpegturbo

import (
	"bytes"
	"encoding/binary"
	"errors"
	"image"
	"image/color"
	"image/jpeg"
	"io"
	"math/rand"
	"os"
	"strings"
	"testing"
)

// requireLib skips the test when libturbojpeg cannot be loaded here.
func requireLib(t *testing.T) {
	t.Helper()
	if err := Available(); err != nil {
		t.Skipf("libjpeg-turbo not usable (apt-get install libturbojpeg0): %v", err)
	}
}

// photoLike returns a smooth w×h picture with a little noise, RGB or gray.
func photoLike(w, h int, gray bool, seed int64) image.Image {
	rng := rand.New(rand.NewSource(seed))
	if gray {
		m := image.NewGray(image.Rect(0, 0, w, h))
		for i := range m.Pix {
			x, y := i%w, i/w
			m.Pix[i] = byte((x*255/w+y*255/h)/2 + rng.Intn(4))
		}
		return m
	}
	m := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			m.SetRGBA(x, y, color.RGBA{byte(x * 255 / w), byte(y * 255 / h), byte(rng.Intn(32) + 100), 255})
		}
	}
	return m
}

func encode(t *testing.T, m image.Image, q int) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := jpeg.Encode(&b, m, &jpeg.Options{Quality: q}); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func fixture(t *testing.T, name string) []byte {
	t.Helper()
	data, err := os.ReadFile("../testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// poisoned returns n bytes of 0xA5, to see which ones a decode wrote.
func poisoned(n int) []byte { return bytes.Repeat([]byte{0xA5}, n) }

func TestOpenErrors(t *testing.T) {
	_, err := open("libimgpipe-no-such-library.so.0")
	if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "libturbojpeg0") {
		t.Errorf("missing library: %v", err)
	}
	// A library that exists but is not TurboJPEG lacks the first symbol.
	if _, err := open("libc.so.6"); err == nil || !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "lacks tjInitDecompress") {
		if err != nil && strings.Contains(err.Error(), "libc.so.6: cannot open") {
			t.Skip("no glibc here")
		}
		t.Errorf("libc: %v", err)
	}
}

func TestErrorClassification(t *testing.T) {
	for _, tc := range []struct {
		msg      string
		harmless bool
		eof      bool
	}{
		{"Corrupt JPEG data: 4 extraneous bytes before marker 0xd9", true, false},
		{"Warning: unknown JFIF revision number 3.01", true, false},
		{"Unknown Adobe color transform code 7", true, false},
		{"Corrupt JPEG data: bad ICC marker", true, false},
		{"Premature end of JPEG file", false, true},
		{"Corrupt JPEG data: bad Huffman code", false, false},
		{"Corrupt JPEG data: premature end of data segment", false, false},
		{"Corrupt JPEG data: found marker 0xd9 instead of RST3", false, false},
		{"Inconsistent progression sequence for component 0 coefficient 1", false, false},
		{"Some warning a newer libjpeg-turbo adds", false, false},
	} {
		if got := harmless(tc.msg); got != tc.harmless {
			t.Errorf("harmless(%q) = %v", tc.msg, got)
		}
		e := &Error{Msg: tc.msg, Warning: true}
		if got := errors.Is(e, io.ErrUnexpectedEOF); got != tc.eof {
			t.Errorf("errors.Is(%q, io.ErrUnexpectedEOF) = %v", tc.msg, got)
		}
		if e.Error() != tc.msg {
			t.Errorf("Error() = %q, want the library's message", e.Error())
		}
	}
}

func TestColorspaceString(t *testing.T) {
	for c, want := range map[Colorspace]string{RGB: "RGB", YCbCr: "YCbCr", Gray: "Gray", CMYK: "CMYK", YCCK: "YCCK", 9: "Colorspace(9)"} {
		if c.String() != want {
			t.Errorf("%d: %q, want %q", int(c), c.String(), want)
		}
		if got, want := c.DecodesToRGB(), c <= Gray; got != want {
			t.Errorf("%v.DecodesToRGB() = %v", c, got)
		}
	}
}

func TestDecodeHeader(t *testing.T) {
	requireLib(t)
	for _, tc := range []struct {
		name string
		data []byte
		want Header
	}{
		{"colour 4:2:0", encode(t, photoLike(37, 23, false, 1), 90), Header{37, 23, YCbCr}},
		{"gray", encode(t, photoLike(5, 300, true, 2), 75), Header{5, 300, Gray}},
		{"1x1", encode(t, photoLike(1, 1, false, 3), 100), Header{1, 1, YCbCr}},
		{"Adobe CMYK", fixture(t, "cmyk.jpg"), Header{33, 21, YCCK}},
		{"progressive", fixture(t, "progressive.jpg"), Header{33, 21, YCbCr}},
	} {
		got, err := DecodeHeader(tc.data)
		if err != nil || got != tc.want {
			t.Errorf("%s: %+v, %v; want %+v", tc.name, got, err, tc.want)
		}
	}
	for _, tc := range []struct {
		name string
		data []byte
		want string
	}{
		{"empty", nil, "empty JPEG data"},
		{"PNG", []byte("\x89PNG\r\n\x1a\n0000000000000"), "Not a JPEG file"},
		{"SOI only", []byte{0xff, 0xd8}, ""},
		{"cut before the first scan", fixture(t, "sub420.jpg")[:300], ""},
	} {
		if _, err := DecodeHeader(tc.data); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one containing %q", tc.name, err, tc.want)
		}
	}
}

// TestDecodeLayouts checks that Decode writes exactly the pixel bytes of
// each row at any stride, and that RGBX is RGB with a 255 after each pixel.
func TestDecodeLayouts(t *testing.T) {
	requireLib(t)
	for _, src := range []image.Image{photoLike(61, 35, false, 4), photoLike(9, 1, true, 5)} {
		data := encode(t, src, 90)
		w, h := src.Bounds().Dx(), src.Bounds().Dy()
		tight := make([]byte, w*h*3)
		if err := Decode(data, tight, w, h, w*3, PixelRGB); err != nil {
			t.Fatal(err)
		}
		for _, pad := range []int{0, 1, 13} {
			for _, f := range []PixelFormat{PixelRGB, PixelRGBX} {
				bpp := f.bytesPerPixel()
				stride := w*bpp + pad
				pix := poisoned(h*stride + 7) // and after the last row
				if err := Decode(data, pix, w, h, stride, f); err != nil {
					t.Fatal(err)
				}
				for y := 0; y < h; y++ {
					for x := 0; x < w; x++ {
						got := pix[y*stride+x*bpp:][:bpp]
						want := tight[(y*w+x)*3:][:3]
						if !bytes.Equal(got[:3], want) || (bpp == 4 && got[3] != 255) {
							t.Fatalf("format %d pad %d: pixel (%d,%d) = %v, want %v", f, pad, x, y, got, want)
						}
					}
					end := (y + 1) * stride
					if y == h-1 {
						end = len(pix)
					}
					for i := y*stride + w*bpp; i < end; i++ {
						if pix[i] != 0xA5 {
							t.Fatalf("format %d pad %d: padding byte %d after row %d written", f, pad, i-y*stride-w*bpp, y)
						}
					}
				}
			}
		}
	}
}

// TestDecodeArguments checks that bad arguments are refused before the
// library writes anything.
func TestDecodeArguments(t *testing.T) {
	requireLib(t)
	data := encode(t, photoLike(20, 10, false, 6), 90)
	cmyk := fixture(t, "cmyk.jpg")
	for _, tc := range []struct {
		name      string
		data      []byte
		n         int // buffer size
		w, h, str int
		f         PixelFormat
		want      string
	}{
		{"unknown format", data, 600, 20, 10, 60, 7, "unknown pixel format 7"},
		{"empty data", nil, 600, 20, 10, 60, PixelRGB, "empty JPEG data"},
		{"zero width", data, 600, 0, 10, 60, PixelRGB, "out of range"},
		{"negative height", data, 600, 20, -1, 60, PixelRGB, "out of range"},
		{"stride below a row", data, 600, 20, 10, 59, PixelRGB, "stride 59 for a row of 60 bytes"},
		{"RGBX stride of RGB", data, 800, 20, 10, 60, PixelRGBX, "stride 60 for a row of 80 bytes"},
		{"buffer one short", data, 599, 20, 10, 60, PixelRGB, "buffer holds 599 bytes"},
		{"last row padding not needed", data, 20*3 + 9*70, 20, 10, 70, PixelRGB, ""},
		{"smaller than the file", data, 600, 19, 10, 57, PixelRGB, "JPEG is 20x10, not 19x10"},
		{"larger than the file", data, 2000, 40, 10, 120, PixelRGB, "JPEG is 20x10, not 40x10"},
		{"CMYK", cmyk, 33 * 21 * 3, 33, 21, 99, PixelRGB, "cannot decode YCCK JPEG to RGB"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pix := poisoned(tc.n)
			err := Decode(tc.data, pix, tc.w, tc.h, tc.str, tc.f)
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
			if !bytes.Equal(pix, poisoned(tc.n)) {
				t.Fatal("the buffer was written")
			}
		})
	}
}

// scanStart returns the offset of the entropy-coded data of data's last
// scan.
func scanStart(t *testing.T, data []byte) int {
	t.Helper()
	i := bytes.LastIndex(data, []byte{0xff, 0xda})
	if i < 0 {
		t.Fatal("no SOS")
	}
	return i + 2 + int(binary.BigEndian.Uint16(data[i+2:]))
}

// TestDecodeDamaged checks what libjpeg-turbo's warnings become.
func TestDecodeDamaged(t *testing.T) {
	requireLib(t)
	good := encode(t, photoLike(64, 64, false, 7), 90)
	s := scanStart(t, good)
	badHuffman := bytes.Clone(good)
	for i := s + 8; i < s+40; i += 2 {
		badHuffman[i], badHuffman[i+1] = 0xff, 0x00 // a stuffed 0xFF: all-ones codes
	}
	extraneous := append(append(bytes.Clone(good[:len(good)-2]), "junk"...), 0xff, 0xd9)
	// 600 copies of a progressive file's last scan: libjpeg would warn about
	// the progression, but the scan limit stops it first.
	prog := fixture(t, "progressive_gray.jpg")
	last := bytes.LastIndex(prog, []byte{0xff, 0xda})
	manyScans := bytes.Clone(prog[:len(prog)-2])
	for range 600 {
		manyScans = append(manyScans, prog[last:len(prog)-2]...)
	}
	manyScans = append(manyScans, 0xff, 0xd9)
	threeScans := append(append(append(bytes.Clone(prog[:len(prog)-2]), prog[last:len(prog)-2]...), prog[last:len(prog)-2]...), 0xff, 0xd9)

	for _, tc := range []struct {
		name    string
		data    []byte
		w, h    int
		want    string // "" for success
		warning bool
		eof     bool
	}{
		{"intact", good, 64, 64, "", false, false},
		{"extraneous bytes before EOI", extraneous, 64, 64, "", false, false},
		{"no EOI", good[:len(good)-2], 64, 64, "Premature end of JPEG file", true, true},
		{"cut mid-scan", good[:s+100], 64, 64, "Premature end of JPEG file", true, true},
		{"bad Huffman code", badHuffman, 64, 64, "Corrupt JPEG data", true, false},
		{"progression repeated", threeScans, 33, 21, "Inconsistent progression sequence", true, false},
		{"600 scans", manyScans, 33, 21, "more than 500 scans", false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Decode(tc.data, make([]byte, tc.w*tc.h*3), tc.w, tc.h, tc.w*3, PixelRGB)
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			var e *Error
			if !errors.As(err, &e) || !strings.Contains(e.Msg, tc.want) {
				t.Fatalf("error %v, want an *Error containing %q", err, tc.want)
			}
			if tc.warning && !e.Warning {
				t.Errorf("%q is not marked as a warning", e.Msg)
			}
			if errors.Is(err, io.ErrUnexpectedEOF) != tc.eof {
				t.Errorf("errors.Is(%v, io.ErrUnexpectedEOF) = %v", err, !tc.eof)
			}
		})
	}
}

// TestHandleAfterFailure decodes a good file after each kind of failure,
// many times: TurboJPEG 2.x fails every later call on a handle left
// mid-stream by some failures, which must not touch a later call.
func TestHandleAfterFailure(t *testing.T) {
	requireLib(t)
	good := encode(t, photoLike(30, 20, false, 8), 90)
	want := make([]byte, 30*20*3)
	if err := Decode(good, want, 30, 20, 90, PixelRGB); err != nil {
		t.Fatal(err)
	}
	sub410 := fixture(t, "sub410.jpg") // TurboJPEG 2.x: header refused mid-stream
	bad := [][]byte{
		sub410,
		good[:200],
		append([]byte{0xff, 0xd8, 0xff, 0xc4, 0x00, 0x05}, bytes.Repeat([]byte{0xee}, 50)...),
		good[:len(good)-30],
	}
	for i := range 40 {
		b := bad[i%len(bad)]
		DecodeHeader(b)
		Decode(b, make([]byte, 23*13*3), 23, 13, 69, PixelRGB)
		got := make([]byte, len(want))
		if err := Decode(good, got, 30, 20, 90, PixelRGB); err != nil {
			t.Fatalf("after bad input %d: %v", i%len(bad), err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("after bad input %d: pixels differ", i%len(bad))
		}
	}
}

// withoutSegments returns data without its marker segments of type m before the first scan.
func withoutSegments(t *testing.T, data []byte, m byte) []byte {
	t.Helper()
	out := bytes.Clone(data[:2])
	for p := 2; p+4 <= len(data) && data[p] == 0xff; {
		if data[p+1] == 0xda {
			return append(out, data[p:]...)
		}
		end := p + 2 + int(binary.BigEndian.Uint16(data[p+2:]))
		if data[p+1] != m {
			out = append(out, data[p:end]...)
		}
		p = end
	}
	t.Fatal("no scan")
	return nil
}

// TestDecodeIndependentOfHistory: a file that lacks tables decodes the same after other
// files as first. libjpeg keeps a handle's tables from file to file, so a reused handle
// decoded a Motion-JPEG frame (no Huffman tables: libjpeg-turbo gives it the standard
// ones) with the previous file's tables ("bad Huffman code"), and a file without
// quantisation tables with the previous file's.
func TestDecodeIndependentOfHistory(t *testing.T) {
	requireLib(t)
	frame := encode(t, photoLike(40, 24, false, 9), 90) // Go's encoder uses the standard tables
	want := make([]byte, 40*24*3)
	if err := Decode(frame, want, 40, 24, 120, PixelRGB); err != nil {
		t.Fatal(err)
	}
	others := [][]byte{fixture(t, "progressive.jpg"), encode(t, photoLike(40, 24, true, 3), 20)}
	for _, tc := range []struct {
		name string
		data []byte
		err  string // "" for want's pixels
	}{
		{"Motion-JPEG frame (no DHT)", withoutSegments(t, frame, 0xc4), ""},
		{"no DQT", withoutSegments(t, frame, 0xdb), "Quantization table 0x00 was not defined"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for i := range 2 * len(others) {
				if i%2 == 1 { // every other round comes right after another file
					o := others[i/2]
					hd, err := DecodeHeader(o)
					if err != nil {
						t.Fatal(err)
					}
					if err := Decode(o, make([]byte, hd.W*hd.H*3), hd.W, hd.H, hd.W*3, PixelRGB); err != nil {
						t.Fatal(err)
					}
				}
				got := make([]byte, len(want))
				err := Decode(tc.data, got, 40, 24, 120, PixelRGB)
				switch {
				case tc.err == "" && err != nil:
					t.Fatalf("round %d: %v", i, err)
				case tc.err == "" && !bytes.Equal(got, want):
					t.Fatalf("round %d: pixels differ from the file with its tables", i)
				case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
					t.Fatalf("round %d: error %v, want %q", i, err, tc.err)
				}
			}
		})
	}
}
