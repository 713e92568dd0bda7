package stages

import (
	"bytes"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
	"strings"
	"testing"

	"github.com/imgpipe/imgpipe/stages/jpegturbo"
)

func TestAutoDCTScale(t *testing.T) {
	thumb := ResizeSpec{Width: 256, Height: 256, Fit: FitInside, Filter: FilterLanczos3}
	for _, tc := range []struct {
		name string
		spec ResizeSpec
		w, h int
		want int
	}{
		{"12 MP photo to a 256 thumbnail", thumb, 4000, 3000, 8},                                                                       // 500x375 ≥ 256x192
		{"portrait: the height decides", thumb, 3000, 4000, 8},                                                                         // 375x500 ≥ 192x256
		{"2048 wide: 1/8 is exactly 256", thumb, 2048, 1536, 8},                                                                        // 256x192
		{"2047 wide: 1/8 is 256 by rounding up", thumb, 2047, 1535, 8},                                                                 // 256x192 again
		{"1.9x the box: 1/2 would fall below", thumb, 490, 300, 1},                                                                     // 245 < 256
		{"2x the box: 1/2 lands on it", thumb, 512, 300, 2},                                                                            // 256x150
		{"1000 wide: 1/2 but not 1/4", thumb, 1000, 700, 2},                                                                            // 250 < 256 at 1/4
		{"enlarging: never scaled", thumb, 100, 80, 1},                                                                                 //
		{"exact stretch: each side on its own", ResizeSpec{Width: 300, Height: 100, Fit: FitExact, Filter: FilterArea}, 2400, 1600, 8}, // 300x200
		{"exact: the tighter side decides", ResizeSpec{Width: 300, Height: 500, Fit: FitExact, Filter: FilterArea}, 2400, 1600, 2},     // 800 ≥ 500, 400 < 500
		// cover: the pre-crop size (Scaled) must be kept, not just the crop.
		{"cover: pre-crop side decides", ResizeSpec{Width: 256, Height: 256, Fit: FitCover, Filter: FilterLinear}, 4000, 2000, 4}, // scaled 512x256; 1/8 gives 500x250
		{"cover square", ResizeSpec{Width: 100, Height: 100, Fit: FitCover, Filter: FilterLinear}, 800, 800, 8},
		{"width only", ResizeSpec{Width: 200, Fit: FitExact, Filter: FilterArea}, 1600, 1200, 8}, // height 150 either way
		// The derived height of 1600x1203 is round(150.4) = 150, but 151 from every
		// scaled size (1/2: 800x602 gives 150.5): the output would change, so none is taken.
		{"derived side would move", ResizeSpec{Width: 200, Fit: FitExact, Filter: FilterArea}, 1600, 1203, 1},
		// 1/8 gives 251 < 256 wide; 1/4 gives 501x293, derived height round(149.7) = 150 as
		// for the full size (round(149.8)).
		{"derived side kept at 1/4", ResizeSpec{Width: 256, Fit: FitExact, Filter: FilterArea}, 2001, 1171, 4},
		{"tiny", thumb, 1, 1, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := AutoDCTScale(tc.spec, tc.w, tc.h)
			if got != tc.want {
				t.Fatalf("AutoDCTScale(%dx%d) = 1/%d, want 1/%d", tc.w, tc.h, got, tc.want)
			}
			// The rule's promise, checked directly: same output, never below the
			// resize's own pre-crop size (1 is the full image itself).
			if got == 1 {
				return
			}
			fx, fy := tc.spec.Axes(tc.w, tc.h)
			sw, sh := jpegturbo.ScaledSize(tc.w, tc.h, got)
			x, y := tc.spec.Axes(sw, sh)
			if x.Out != fx.Out || y.Out != fy.Out || sw < fx.Scaled || sh < fy.Scaled {
				t.Fatalf("1/%d gives %dx%d -> %dx%d, full size %dx%d (pre-crop %dx%d)", got, sw, sh, x.Out, y.Out, fx.Out, fy.Out, fx.Scaled, fy.Scaled)
			}
		})
	}
}

// smoothJPEG encodes a w×h gradient with Go's encoder.
func smoothJPEG(t *testing.T, w, h int) []byte {
	t.Helper()
	m := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			m.SetRGBA(x, y, color.RGBA{byte(x * 255 / w), byte(y * 255 / h), byte((x ^ y) & 63), 255})
		}
	}
	var b bytes.Buffer
	if err := jpeg.Encode(&b, m, &jpeg.Options{Quality: 90}); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestDecodeScaled checks sizes and pixels of a scaled decode against
// libjpeg-turbo's own scaled decode of the upright file, turned by the EXIF
// orientation as orientRef turns it; that Scale sees the oriented size; and
// that the allocation is the scaled size.
func TestDecodeScaled(t *testing.T) {
	requireTurbo(t)
	fx := fixtures(t)
	fx["photo 301x203"] = smoothJPEG(t, 301, 203)
	for _, name := range []string{"photo 301x203", "sub420.jpg", "progressive.jpg", "orient_1.jpg", "orient_3.jpg", "orient_5.jpg", "orient_6.jpg", "orient_8.jpg"} {
		data := fx[name]
		o := 1
		if strings.HasPrefix(name, "orient_") {
			o = int(name[len("orient_")] - '0')
		}
		for _, d := range jpegturbo.ScaleDenoms {
			t.Run(fmt.Sprintf("%s 1/%d", name, d), func(t *testing.T) {
				hd, err := DecodeHeader(data, DecodeOptions{Orient: true})
				if err != nil {
					t.Fatal(err)
				}
				var asked image.Point
				opt := turboOpt
				opt.Scale = func(w, h int) int { asked = image.Pt(w, h); return d }
				a := &paddedAlloc{pad: 5}
				got, by, err := DecodeBy(data, opt, a.alloc)
				if err != nil {
					t.Fatal(err)
				}
				if by != (Decoded{JPEGTurbo, d}) {
					t.Errorf("decoded by %+v, want turbo at 1/%d", by, d)
				}
				if asked != image.Pt(hd.W, hd.H) {
					t.Errorf("Scale asked for %v, want the oriented size %dx%d", asked, hd.W, hd.H)
				}
				th, err := jpegturbo.DecodeHeader(data)
				if err != nil {
					t.Fatal(err)
				}
				sw, sh := jpegturbo.ScaledSize(th.W, th.H, d)
				upright := NewImage(sw, sh, 3)
				if err := jpegturbo.DecodeScaled(data, upright.Pix, d, sw, sh, upright.Stride, jpegturbo.PixelRGB); err != nil {
					t.Fatal(err)
				}
				want := orientRef(upright, o)
				if len(a.calls) != 1 || a.calls[0] != image.Pt(want.W, want.H) {
					t.Fatalf("alloc asked for %v, want [%dx%d]", a.calls, want.W, want.H)
				}
				checkPadding(t, got)
				sameImage(t, got, want)
			})
		}
	}
}

// TestDecodeScaledFallbacks: what is not decoded by libjpeg-turbo comes at
// full size, and says so; bad scales and the pixel limit are errors before
// any allocation.
func TestDecodeScaledFallbacks(t *testing.T) {
	fx := fixtures(t)
	png := encoded(t, func(b *bytes.Buffer) error { return Encode(b, NewImage(30, 20, 3), SaveOptions{}) })
	eighth := func(int, int) int { return 8 }
	turboHere := jpegturbo.Available() == nil
	for _, tc := range []struct {
		name  string
		data  []byte
		opt   DecodeOptions
		turbo bool // needs libjpeg-turbo
		w, h  int
		want  Decoded
	}{
		{"backend go decodes full size", fx["orient_1.jpg"], DecodeOptions{JPEG: JPEGGo, Scale: eighth}, false, 24, 16, Decoded{JPEGGo, 1}},
		{"CMYK falls back to Go at full size", fx["cmyk.jpg"], DecodeOptions{JPEG: JPEGTurbo, Scale: eighth}, true, 33, 21, Decoded{JPEGGo, 1}},
		{"PNG is never scaled", png, DecodeOptions{JPEG: JPEGTurbo, Scale: eighth}, false, 30, 20, Decoded{JPEGGo, 1}},
		{"nil Scale is full size", fx["orient_1.jpg"], DecodeOptions{JPEG: JPEGTurbo}, true, 24, 16, Decoded{JPEGTurbo, 1}},
		{"turbo at 1/8", fx["orient_1.jpg"], DecodeOptions{JPEG: JPEGTurbo, Scale: eighth}, true, 3, 2, Decoded{JPEGTurbo, 8}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.turbo && !turboHere {
				t.Skip("libjpeg-turbo not usable here")
			}
			m, by, err := DecodeBy(tc.data, tc.opt, nil)
			if err != nil {
				t.Fatal(err)
			}
			if by != tc.want || m.W != tc.w || m.H != tc.h {
				t.Fatalf("%dx%d by %+v, want %dx%d by %+v", m.W, m.H, by, tc.w, tc.h, tc.want)
			}
		})
	}

	requireTurbo(t)
	good := fx["sub420.jpg"] // 23x13
	for _, tc := range []struct {
		name  string
		max   int64
		denom int
		want  string
		is    error
	}{
		// The limit is on the header's full size: 3x2 pixels at 1/8 do not let 299 through.
		{"limit on the full size", 23*13 - 1, 8, "over the 298-pixel limit", ErrTooLarge},
		{"scale 1/3", 0, 3, "decode scale 1/3 is not one of", nil},
		{"scale 0", 0, 0, "decode scale 1/0 is not one of", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			calls := 0
			opt := DecodeOptions{MaxPixels: tc.max, JPEG: JPEGTurbo, Scale: func(int, int) int { return tc.denom }}
			_, _, err := DecodeBy(good, opt, func(w, h, c int) (*Image, error) { calls++; return NewImage(w, h, c), nil })
			if err == nil || !strings.Contains(err.Error(), tc.want) || (tc.is != nil && !errors.Is(err, tc.is)) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
			if calls != 0 {
				t.Fatalf("alloc called %d times", calls)
			}
		})
	}
}
