package stages

import (
	"bytes"
	"errors"
	"fmt"
	"image"
	"image/jpeg"
	"io"
	"math/rand"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/imgpipe/imgpipe/stages/jpegturbo"
)

// Tests of DecodeOptions.JPEG = JPEGTurbo. libjpeg-turbo's pixels are not
// Go's (another IDCT, and "fancy" interpolated chroma where Go replicates
// chroma samples), so they are compared with bounds, not for equality:
//   - on photo-like pictures the whole RGB result is close;
//   - on pictures with sharp colour edges (the fixtures' checkerboard, random
//     noise) chroma upsampling makes RGB differ a lot near edges, so there
//     the grayscale of both is compared: its weights invert the JPEG colour
//     transform, so luma, which neither decoder upsamples, is what remains.
//
// Geometry (size, orientation, padding, the allocator) must match exactly.

var turboOpt = DecodeOptions{Orient: true, JPEG: JPEGTurbo}

// requireTurbo skips the test when libjpeg-turbo cannot be loaded here.
func requireTurbo(t testing.TB) {
	t.Helper()
	if err := JPEGTurbo.Check(); err != nil {
		t.Skipf("libjpeg-turbo not usable (apt-get install libturbojpeg0): %v", err)
	}
}

// diffStats returns the mean and largest absolute difference of two images
// of the same geometry, over the pixel bytes only.
func diffStats(t *testing.T, a, b *Image) (mean float64, most int) {
	t.Helper()
	if a.W != b.W || a.H != b.H || a.C != b.C {
		t.Fatalf("%dx%dx%d vs %dx%dx%d", a.W, a.H, a.C, b.W, b.H, b.C)
	}
	sum := 0
	for y := 0; y < a.H; y++ {
		ra, rb := a.Row(y), b.Row(y)
		for i := range ra {
			d := int(ra[i]) - int(rb[i])
			d = max(d, -d)
			sum += d
			most = max(most, d)
		}
	}
	return float64(sum) / float64(a.Len()), most
}

func grayOf(m *Image) *Image {
	g := NewImage(m.W, m.H, 1)
	Grayscale(g, m)
	return g
}

// bound is how far turbo may be from Go: on RGB, or on luma only.
type bound struct {
	rgbMean  float64 // 0: RGB not compared
	rgbMax   int
	grayMean float64
	grayMax  int
}

// checkClose decodes data with both backends and checks the geometry and b.
func checkClose(t *testing.T, data []byte, b bound) {
	t.Helper()
	want, err := Decode(data, DecodeOptions{Orient: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	a := &paddedAlloc{pad: 5}
	got, err := Decode(data, turboOpt, a.alloc)
	if err != nil {
		t.Fatal(err)
	}
	if len(a.calls) != 1 || a.calls[0] != image.Pt(want.W, want.H) {
		t.Fatalf("alloc asked for %v, want [%dx%d]", a.calls, want.W, want.H)
	}
	checkPadding(t, got)
	gm, gx := diffStats(t, grayOf(got), grayOf(want))
	if gm > b.grayMean || gx > b.grayMax {
		t.Errorf("luma differs from Go's by %.3f on average (bound %.3f), %d at most (bound %d)", gm, b.grayMean, gx, b.grayMax)
	}
	if b.rgbMean > 0 {
		m, x := diffStats(t, got, want)
		if m > b.rgbMean || x > b.rgbMax {
			t.Errorf("RGB differs from Go's by %.3f on average (bound %.3f), %d at most (bound %d)", m, b.rgbMean, x, b.rgbMax)
		}
	}
}

func TestJPEGBackendCheck(t *testing.T) {
	for _, tc := range []struct {
		b       JPEGBackend
		wantErr string
	}{
		{"", ""},
		{JPEGGo, ""},
		{JPEGAuto, ""},
		{"nvjpeg", `unknown JPEG backend "nvjpeg" (want "auto", "go" or "turbo")`},
		{"Turbo", `unknown JPEG backend "Turbo"`},
	} {
		err := tc.b.Check()
		if tc.wantErr == "" {
			if err != nil {
				t.Errorf("%q: %v", tc.b, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("%q: error %v, want %q", tc.b, err, tc.wantErr)
		}
		// Decode and DecodeHeader refuse it before reading anything.
		opt := DecodeOptions{JPEG: tc.b}
		if _, err := DecodeHeader(fixtures(t)["orient_1.jpg"], opt); err == nil || !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("DecodeHeader with %q: %v", tc.b, err)
		}
		if _, err := Decode([]byte("not even an image"), opt, nil); err == nil || !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("Decode with %q: %v", tc.b, err)
		}
	}
	// Whether turbo is usable depends on the machine; its answer must agree
	// with the package's.
	if got, want := JPEGTurbo.Check(), jpegturbo.Available(); (got == nil) != (want == nil) {
		t.Errorf("JPEGTurbo.Check() = %v, jpegturbo.Available() = %v", got, want)
	}
}

// TestDecodeTurboFixtures compares turbo with Go on every committed JPEG:
// each subsampling, progressive colour and gray, CMYK.
func TestDecodeTurboFixtures(t *testing.T) {
	requireTurbo(t)
	// The fixtures are a checkerboard with 1-pixel colour detail: fancy
	// upsampling moves chroma edges (RGB differs by 8 to 15 on average, 69
	// at most), so only luma is compared (measured: mean ≤ 0.25, max ≤ 5).
	// 4:4:4 and 4:1:1, which libjpeg-turbo does not interpolate, and gray
	// are close in RGB too (mean ≤ 0.21, max ≤ 2).
	pattern := bound{grayMean: 1, grayMax: 12}
	near := bound{rgbMean: 0.5, rgbMax: 4, grayMean: 0.5, grayMax: 3}
	for name, data := range fixtures(t) {
		if Sniff(data) != "jpeg" {
			continue
		}
		t.Run(name, func(t *testing.T) {
			switch {
			case name == "cmyk.jpg", name == "sub410.jpg" && !turboReads(data):
				// Go's decoder does these: the same bits.
				want, err := Decode(data, DecodeOptions{}, nil)
				if err != nil {
					t.Fatal(err)
				}
				got, err := Decode(data, turboOpt, nil)
				if err != nil {
					t.Fatal(err)
				}
				sameImage(t, got, want)
			case name == "sub444.jpg", name == "sub411.jpg", name == "progressive_gray.jpg":
				checkClose(t, data, near)
			default:
				checkClose(t, data, pattern)
			}
		})
	}
}

// turboReads reports whether libjpeg-turbo accepts data's header
// (TurboJPEG 2.x refuses 4:1:0 subsampling, 3.x reads it).
func turboReads(data []byte) bool {
	_, err := jpegturbo.DecodeHeader(data)
	return err == nil
}

// TestDecodeTurboRandom compares turbo with Go on Go-encoded random
// pictures (4:2:0 colour and gray) of every test shape and a few larger
// ones: noise, where only luma is comparable, and smooth photo-like
// gradients, where RGB is.
func TestDecodeTurboRandom(t *testing.T) {
	requireTurbo(t)
	rng := rand.New(rand.NewSource(7))
	shapes := append([]shape{{64, 48, 0}, {333, 211, 0}, {1024, 17, 0}}, testShapes...)
	for _, s := range shapes {
		if s.pad != 0 {
			continue
		}
		for _, q := range []int{50, 90, 100} {
			noise := randImage(rng, s.w, s.h, 3, 0)
			smooth := smoothImage(rng, s.w, s.h, 3, 0)
			for _, tc := range []struct {
				name string
				src  image.Image
				b    bound
			}{
				// Measured: noise luma mean ≤ 0.27, max ≤ 21 (where
				// R, G or B clamp); smooth RGB mean ≤ 2.12 (17x9, whose
				// gradients are steepest), max ≤ 12, luma ≤ 0.58 and 4;
				// gray mean ≤ 0.03, max 1.
				{"noise", toRGBA(noise), bound{grayMean: 1, grayMax: 32}},
				{"smooth", toRGBA(smooth), bound{rgbMean: 2.5, rgbMax: 24, grayMean: 1, grayMax: 8}},
				{"noise-gray", grayImage(noise), bound{rgbMean: 0.25, rgbMax: 2, grayMean: 0.25, grayMax: 2}},
			} {
				t.Run(fmt.Sprintf("%dx%d/q%d/%s", s.w, s.h, q, tc.name), func(t *testing.T) {
					var b bytes.Buffer
					if err := jpeg.Encode(&b, tc.src, &jpeg.Options{Quality: q}); err != nil {
						t.Fatal(err)
					}
					checkClose(t, b.Bytes(), tc.b)
				})
			}
		}
	}
}

func grayImage(m *Image) *image.Gray {
	g := image.NewGray(image.Rect(0, 0, m.W, m.H))
	for y := 0; y < m.H; y++ {
		row := m.Row(y)
		for x := 0; x < m.W; x++ {
			g.Pix[y*g.Stride+x] = row[3*x]
		}
	}
	return g
}

// TestDecodeTurboPhotos compares the backends on real photos, when there
// are some: IMGPIPE_BENCH_PHOTO, or the folder bench/README describes
// (out/bench-photos). It is skipped otherwise: no photo is committed.
func TestDecodeTurboPhotos(t *testing.T) {
	requireTurbo(t)
	paths := photoPaths()
	if len(paths) == 0 {
		t.Skip("no photos: set IMGPIPE_BENCH_PHOTO or fill out/bench-photos")
	}
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		t.Run(filepath.Base(p), func(t *testing.T) {
			// Measured on 20 of them: RGB mean ≤ 1.03, max ≤ 37 (chroma
			// edges), luma mean ≤ 0.3, max ≤ 6.
			checkClose(t, data, bound{rgbMean: 2, rgbMax: 64, grayMean: 0.5, grayMax: 10})
		})
	}
}

// photoPaths lists the JPEG photos to test on: the file IMGPIPE_BENCH_PHOTO
// names, or 4 of out/bench-photos, spread out (a few seconds under -race).
func photoPaths() []string {
	if p := os.Getenv("IMGPIPE_BENCH_PHOTO"); p != "" {
		return []string{p}
	}
	all, _ := filepath.Glob("../out/bench-photos/*/*.jpg")
	sort.Strings(all)
	var out []string
	for i := 0; i < len(all) && len(out) < 4; i += max(1, len(all)/4) {
		out = append(out, all[i])
	}
	return out
}

// TestDecodeTurboOrientation checks that every EXIF orientation gives the
// geometry of the Go path: the same allocation, and the upright turbo
// decode turned exactly as orientRef turns it.
func TestDecodeTurboOrientation(t *testing.T) {
	requireTurbo(t)
	fx := fixtures(t)
	upright, err := Decode(fx["orient_1.jpg"], turboOpt, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"orient_1", "orient_2", "orient_3", "orient_4", "orient_5", "orient_6", "orient_7", "orient_8", "orient_3_le", "orient_6_le"} {
		t.Run(name, func(t *testing.T) {
			data := fx[name+".jpg"]
			o := int(name[len("orient_")] - '0')
			goImg, err := Decode(data, DecodeOptions{Orient: true}, nil)
			if err != nil {
				t.Fatal(err)
			}
			a := &paddedAlloc{pad: 7}
			got, err := Decode(data, turboOpt, a.alloc)
			if err != nil {
				t.Fatal(err)
			}
			checkPadding(t, got)
			if len(a.calls) != 1 || a.calls[0] != image.Pt(goImg.W, goImg.H) {
				t.Fatalf("alloc asked for %v, want [%dx%d] as the Go path", a.calls, goImg.W, goImg.H)
			}
			sameImage(t, got, orientRef(upright, o))

			raw, err := Decode(data, DecodeOptions{JPEG: JPEGTurbo}, nil)
			if err != nil {
				t.Fatal(err)
			}
			sameImage(t, raw, upright)
		})
	}
}

// TestDecodeTurboLimit checks that the pixel limit and the size sanity check
// refuse a file before anything is allocated or decoded.
func TestDecodeTurboLimit(t *testing.T) {
	requireTurbo(t)
	good := fixtures(t)["sub420.jpg"] // 23x13, baseline
	for _, tc := range []struct {
		name string
		data []byte
		max  int64
		want error
	}{
		{"over max_pixels", good, 23*13 - 1, ErrTooLarge},
		{"header claims 60000x60000", setJPEGSize(t, good, 60000, 60000), 0, ErrTooLarge},
		{"header claims 9000x9000 in 858 bytes", setJPEGSize(t, good, 9000, 9000), 0, io.ErrUnexpectedEOF},
	} {
		t.Run(tc.name, func(t *testing.T) {
			calls := 0
			_, err := Decode(tc.data, DecodeOptions{MaxPixels: tc.max, JPEG: JPEGTurbo}, func(w, h, c int) (*Image, error) {
				calls++
				return NewImage(w, h, c), nil
			})
			if !errors.Is(err, tc.want) {
				t.Fatalf("error %v, want %v", err, tc.want)
			}
			if calls != 0 {
				t.Fatalf("alloc called %d times for a refused file", calls)
			}
		})
	}
	// At the limit exactly it decodes.
	if _, err := Decode(good, DecodeOptions{MaxPixels: 23 * 13, JPEG: JPEGTurbo}, nil); err != nil {
		t.Fatal(err)
	}
}

// TestDecodeTurboBadInput feeds truncated, empty and garbage files: each
// must give an error (no panic, no image), and where Go's decoder fails the
// turbo path must fail too.
func TestDecodeTurboBadInput(t *testing.T) {
	requireTurbo(t)
	fx := fixtures(t)
	type input struct {
		name string
		data []byte
	}
	var inputs []input
	for _, name := range []string{"sub420.jpg", "sub444.jpg", "progressive.jpg", "progressive_gray.jpg", "orient_6.jpg", "cmyk.jpg"} {
		d := fx[name]
		for _, n := range []int{2, 3, 20, 200, len(d) / 2, len(d) - 40, len(d) - 2, len(d) - 1} {
			inputs = append(inputs, input{fmt.Sprintf("%s cut at %d", name, n), d[:n]})
		}
	}
	inputs = append(inputs,
		input{"zero bytes", nil},
		input{"garbage", []byte("this is not an image at all, honestly")},
		input{"SOI and garbage", append([]byte{0xff, 0xd8}, bytes.Repeat([]byte{0x5a}, 300)...)},
		input{"SOI EOI", []byte{0xff, 0xd8, 0xff, 0xd9}},
	)
	for _, in := range inputs {
		t.Run(in.name, func(t *testing.T) {
			_, goErr := Decode(in.data, DecodeOptions{Orient: true}, nil)
			m, err := Decode(in.data, turboOpt, nil)
			if err == nil || m != nil {
				t.Fatalf("got %v, %v; want an error (Go's decoder says %v)", m, err, goErr)
			}
			if goErr == nil {
				t.Fatalf("Go's decoder takes it, turbo says %v", err)
			}
		})
	}
	// A file cut in its scan data reads as the Go path's "unexpected EOF".
	d := fx["sub420.jpg"]
	for _, n := range []int{len(d) - 40, len(d) - 2} {
		_, err := Decode(d[:n], turboOpt, nil)
		if err != io.ErrUnexpectedEOF {
			t.Errorf("cut at %d: %v, want io.ErrUnexpectedEOF", n, err)
		}
	}
}

// TestDecodeTurboDamaged checks that libjpeg-turbo's warnings fail a file
// exactly when Go's decoder fails it: corrupt entropy-coded data fails both,
// stray bytes before a marker fail neither.
func TestDecodeTurboDamaged(t *testing.T) {
	requireTurbo(t)
	var b bytes.Buffer
	if err := jpeg.Encode(&b, toRGBA(smoothImage(rand.New(rand.NewSource(5)), 64, 64, 3, 0)), &jpeg.Options{Quality: 90}); err != nil {
		t.Fatal(err)
	}
	good := b.Bytes()
	sos := bytes.LastIndex(good, []byte{0xff, 0xda})
	s := sos + 2 + int(good[sos+2])<<8 + int(good[sos+3])
	badHuffman := bytes.Clone(good)
	for i := s + 8; i < s+40; i += 2 {
		badHuffman[i], badHuffman[i+1] = 0xff, 0x00 // all-ones codes
	}
	extraneous := append(append(bytes.Clone(good[:len(good)-2]), "junk"...), 0xff, 0xd9)
	for _, tc := range []struct {
		name string
		data []byte
		ok   bool
	}{
		{"bad Huffman code", badHuffman, false},
		{"extraneous bytes before EOI", extraneous, true},
	} {
		_, goErr := Decode(tc.data, DecodeOptions{}, nil)
		_, err := Decode(tc.data, turboOpt, nil)
		if (goErr == nil) != tc.ok || (err == nil) != tc.ok {
			t.Errorf("%s: Go says %v, turbo says %v; want both to succeed: %v", tc.name, goErr, err, tc.ok)
		}
	}
}

// TestDecodeTurboAlloc checks the allocator's contract on both turbo paths
// (upright: straight into the buffer; turned: after decoding).
func TestDecodeTurboAlloc(t *testing.T) {
	requireTurbo(t)
	fx := fixtures(t)
	for _, name := range []string{"orient_1.jpg", "orient_6.jpg"} {
		data := fx[name]
		t.Run(name, func(t *testing.T) {
			_, err := Decode(data, turboOpt, func(w, h, c int) (*Image, error) { return nil, errors.New("pool empty") })
			if err == nil || !strings.Contains(err.Error(), "pool empty") {
				t.Errorf("failing alloc: %v", err)
			}
			_, err = Decode(data, turboOpt, func(w, h, c int) (*Image, error) { return NewImage(w+1, h, c), nil })
			if err == nil || !strings.Contains(err.Error(), "allocator returned a bad image") {
				t.Errorf("wrong-size alloc: %v", err)
			}
			_, err = Decode(data, turboOpt, func(w, h, c int) (*Image, error) {
				return &Image{W: w, H: h, C: c, Stride: w * c, Pix: make([]byte, w*h*c-1)}, nil
			})
			if err == nil || !strings.Contains(err.Error(), "allocator returned a bad image") {
				t.Errorf("short buffer: %v", err)
			}
		})
	}
	// A turned file that is corrupt takes no buffer; an upright one does
	// (it is decoded in place), as Alloc's doc says.
	for name, wantCalls := range map[string]int{"orient_6.jpg": 0, "orient_1.jpg": 1} {
		d := fx[name]
		calls := 0
		_, err := Decode(d[:len(d)-2], turboOpt, func(w, h, c int) (*Image, error) { calls++; return NewImage(w, h, c), nil })
		if err == nil || calls != wantCalls {
			t.Errorf("%s truncated: error %v, %d alloc calls, want an error and %d", name, err, calls, wantCalls)
		}
	}
}

// TestDecodeTurboConcurrent decodes good and bad files from 8 goroutines
// at once (run it with -race) and checks each result against a serial
// decode: handles and error messages must not leak between goroutines.
func TestDecodeTurboConcurrent(t *testing.T) {
	requireTurbo(t)
	fx := fixtures(t)
	rng := rand.New(rand.NewSource(3))
	var inputs [][]byte
	for _, name := range []string{"sub420.jpg", "sub410.jpg", "cmyk.jpg", "progressive.jpg", "orient_5.jpg", "orient_8.jpg"} {
		inputs = append(inputs, fx[name], fx[name][:len(fx[name])/2])
	}
	for i := 0; i < 4; i++ {
		var b bytes.Buffer
		if err := jpeg.Encode(&b, toRGBA(smoothImage(rng, 97+i*31, 61+i*17, 3, 0)), &jpeg.Options{Quality: 85}); err != nil {
			t.Fatal(err)
		}
		inputs = append(inputs, b.Bytes())
	}
	type result struct {
		m   *Image
		err string
	}
	run := func(data []byte) result {
		m, err := Decode(data, turboOpt, nil)
		if err != nil {
			return result{err: err.Error()}
		}
		return result{m: m}
	}
	want := make([]result, len(inputs))
	for i, d := range inputs {
		want[i] = run(d)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := 0; k < 20; k++ {
				i := (g*7 + k*5) % len(inputs)
				got := run(inputs[i])
				switch {
				case got.err != want[i].err:
					errs <- fmt.Errorf("input %d: error %q, serially %q", i, got.err, want[i].err)
					return
				case got.m != nil && !bytes.Equal(got.m.Pix, want[i].m.Pix):
					errs <- fmt.Errorf("input %d: pixels differ from the serial decode", i)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// FuzzDecodeTurbo checks that no input crashes the turbo path, and that a
// success is consistent with the header, as FuzzDecode does for Go's.
func FuzzDecodeTurbo(f *testing.F) {
	for name, data := range fixtures(f) {
		if strings.HasSuffix(name, ".jpg") {
			f.Add(data)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		requireTurbo(t)
		opt := DecodeOptions{MaxPixels: 1 << 20, Orient: true, JPEG: JPEGTurbo}
		m, err := Decode(data, opt, nil)
		if err != nil {
			if m != nil {
				t.Fatal("image and error both returned")
			}
			return
		}
		if err := m.Check(); err != nil || m.C != 3 {
			t.Fatalf("inconsistent image: %v, C=%d", err, m.C)
		}
		hd, err := DecodeHeader(data, opt)
		if err != nil || hd.W != m.W || hd.H != m.H {
			t.Fatalf("header %+v (%v) disagrees with the %dx%d result", hd, err, m.W, m.H)
		}
	})
}

// BenchmarkDecodeJPEGBackend decodes one 1080p photo-like JPEG with each
// backend, into a reused buffer as the pipeline does. The file is
// IMGPIPE_BENCH_PHOTO as it is, else the first 1920x1080 photo in
// out/bench-photos, else the smooth synthetic picture encoded at quality 90.
func BenchmarkDecodeJPEGBackend(b *testing.B) {
	data, what := benchJPEG(b)
	hd, err := DecodeHeader(data, DecodeOptions{Orient: true})
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("%s: %dx%d, %d bytes", what, hd.W, hd.H, len(data))
	for _, backend := range []JPEGBackend{JPEGGo, JPEGTurbo} {
		b.Run(string(backend), func(b *testing.B) {
			if err := backend.Check(); err != nil {
				b.Skip(err)
			}
			dst := NewImage(hd.W, hd.H, 3)
			alloc := func(w, h, c int) (*Image, error) { return dst, nil }
			opt := DecodeOptions{Orient: true, JPEG: backend}
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				if _, err := Decode(data, opt, alloc); err != nil {
					b.Fatal(err)
				}
			}
			reportMPs(b, hd.W*hd.H)
		})
	}
}

func benchJPEG(b *testing.B) ([]byte, string) {
	if p := os.Getenv("IMGPIPE_BENCH_PHOTO"); p != "" {
		data, err := os.ReadFile(p)
		if err != nil {
			b.Fatal(err)
		}
		return data, p
	}
	all, _ := filepath.Glob("../out/bench-photos/*/*.jpg")
	sort.Strings(all)
	for _, p := range all {
		data, err := os.ReadFile(p)
		if err != nil {
			b.Fatal(err)
		}
		if hd, err := DecodeHeader(data, DecodeOptions{Orient: true}); err == nil && hd.W == benchW && hd.H == benchH {
			return data, p
		}
	}
	var buf bytes.Buffer
	src := smoothImage(rand.New(rand.NewSource(42)), benchW, benchH, 3, 0)
	if err := Encode(&buf, src, SaveOptions{Format: "jpeg", Quality: 90}); err != nil {
		b.Fatal(err)
	}
	return buf.Bytes(), "synthetic smooth 1080p, quality 90"
}

func TestResolveJPEGBackend(t *testing.T) {
	missing := func() error { return fmt.Errorf("%w: libturbojpeg.so.0 not found", jpegturbo.ErrUnavailable) }
	present := func() error { return nil }
	for _, tc := range []struct {
		name     string
		b        JPEGBackend
		turbo    func() error
		want     JPEGBackend
		wantNote string
	}{
		{"empty is go", "", present, JPEGGo, ""},
		{"go stays go", JPEGGo, present, JPEGGo, ""},
		{"turbo stays turbo", JPEGTurbo, missing, JPEGTurbo, ""}, // Check reports a missing library
		{"auto with the library", JPEGAuto, present, JPEGTurbo, ""},
		{"auto without it", JPEGAuto, missing, JPEGGo, "Go's decoder, since libjpeg-turbo unavailable: libturbojpeg.so.0 not found; install libjpeg-turbo (Debian/Ubuntu: apt-get install libturbojpeg0)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, note := resolveJPEGBackend(tc.b, tc.turbo)
			if got != tc.want || (tc.wantNote == "") != (note == "") || !strings.Contains(note, tc.wantNote) {
				t.Errorf("resolve(%q) = %q, %q; want %q, %q", tc.b, got, note, tc.want, tc.wantNote)
			}
		})
	}
	// The exported one answers for this machine.
	got, _ := ResolveJPEGBackend(JPEGAuto)
	if want := map[bool]JPEGBackend{true: JPEGTurbo, false: JPEGGo}[jpegturbo.Available() == nil]; got != want {
		t.Errorf("ResolveJPEGBackend(auto) = %q here, want %q", got, want)
	}
}

// TestDecodeByNamesTheDecoder: the report's decoder is the one that made the
// pixels, JPEG or not, fallbacks included.
func TestDecodeByNamesTheDecoder(t *testing.T) {
	fx := fixtures(t)
	turboHere := jpegturbo.Available() == nil
	for _, tc := range []struct {
		file    string
		backend JPEGBackend
		want    JPEGBackend
	}{
		{"orient_1.jpg", JPEGGo, JPEGGo},
		{"orient_1.jpg", "", JPEGGo},
		{"orient_1.jpg", JPEGAuto, map[bool]JPEGBackend{true: JPEGTurbo, false: JPEGGo}[turboHere]},
		{"orient_6.jpg", JPEGAuto, map[bool]JPEGBackend{true: JPEGTurbo, false: JPEGGo}[turboHere]},
		{"cmyk.jpg", JPEGAuto, JPEGGo}, // libjpeg-turbo does not give CMYK as RGB: Go's decoder does
	} {
		_, d, err := DecodeBy(fx[tc.file], DecodeOptions{JPEG: tc.backend, Orient: true}, nil)
		if by := d.Backend; err != nil || by != tc.want || d.Scale != 1 {
			t.Errorf("%s with %q: decoder %q, %v; want %q", tc.file, tc.backend, by, err, tc.want)
		}
	}
	png := encoded(t, func(b *bytes.Buffer) error { return Encode(b, NewImage(3, 2, 3), SaveOptions{}) })
	if _, d, err := DecodeBy(png, DecodeOptions{JPEG: JPEGAuto}, nil); err != nil || d.Backend != JPEGGo {
		by := d.Backend
		t.Errorf("PNG with auto: decoder %q, %v; want go", by, err)
	}
	if _, d, err := DecodeBy([]byte("junk"), DecodeOptions{JPEG: JPEGAuto}, nil); err == nil || d != (Decoded{}) {
		by := d.Backend
		t.Errorf("junk: decoder %q, %v; want none and an error", by, err)
	}
}
