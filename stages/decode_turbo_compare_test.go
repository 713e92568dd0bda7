package stages

import (
	"bytes"
	"fmt"
	"image"
	"image/jpeg"
	"math/rand"
	"os"
	"path/filepath"
	"sort"
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
	for _, name := range orientFixtures {
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
