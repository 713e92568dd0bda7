package stages

import (
	"fmt"
	"image"
	"image/color"
	"math/rand"
	"testing"
)

// stdImage is one standard-library image type the bridge must read.
type stdImage struct {
	name string
	gray bool // FromImage gives C = 1
	// lossless: ToImage(FromImage(m)) has m's colours, for opaque m.
	lossless bool
	make     func(rng *rand.Rand, r image.Rectangle) image.Image
}

// randBytes fills b from rng.
func randBytes(rng *rand.Rand, b []byte) []byte { rng.Read(b); return b }

var stdImages = []stdImage{
	{"Gray", true, true, func(rng *rand.Rand, r image.Rectangle) image.Image {
		m := image.NewGray(r)
		randBytes(rng, m.Pix)
		return m
	}},
	{"Gray16", true, false, func(rng *rand.Rand, r image.Rectangle) image.Image {
		m := image.NewGray16(r)
		randBytes(rng, m.Pix)
		return m
	}},
	{"RGBA", false, false, func(rng *rand.Rand, r image.Rectangle) image.Image {
		m := image.NewRGBA(r)
		randBytes(rng, m.Pix) // not valid premultiplied colours either: stored bytes are kept
		return m
	}},
	{"RGBA opaque", false, true, func(rng *rand.Rand, r image.Rectangle) image.Image {
		m := image.NewRGBA(r)
		randBytes(rng, m.Pix)
		for i := 3; i < len(m.Pix); i += 4 {
			m.Pix[i] = 255
		}
		return m
	}},
	{"NRGBA", false, false, func(rng *rand.Rand, r image.Rectangle) image.Image {
		m := image.NewNRGBA(r)
		randBytes(rng, m.Pix)
		return m
	}},
	{"RGBA64", false, false, func(rng *rand.Rand, r image.Rectangle) image.Image {
		m := image.NewRGBA64(r)
		randBytes(rng, m.Pix)
		return m
	}},
	{"NRGBA64", false, false, func(rng *rand.Rand, r image.Rectangle) image.Image {
		m := image.NewNRGBA64(r)
		randBytes(rng, m.Pix)
		return m
	}},
	{"CMYK", false, false, func(rng *rand.Rand, r image.Rectangle) image.Image {
		m := image.NewCMYK(r)
		randBytes(rng, m.Pix)
		return m
	}},
	{"Paletted", false, false, func(rng *rand.Rand, r image.Rectangle) image.Image {
		p := color.Palette{}
		for i := 0; i < 256; i++ {
			switch i % 3 {
			case 0:
				p = append(p, color.RGBA{byte(i), byte(3 * i), byte(7 * i), 255})
			case 1:
				p = append(p, color.NRGBA{byte(i), byte(5 * i), byte(11 * i), byte(i)})
			default:
				p = append(p, color.Gray{byte(13 * i)})
			}
		}
		m := image.NewPaletted(r, p)
		randBytes(rng, m.Pix)
		return m
	}},
	{"Alpha", false, false, func(rng *rand.Rand, r image.Rectangle) image.Image {
		m := image.NewAlpha(r)
		randBytes(rng, m.Pix)
		return m
	}},
	{"Alpha16", false, false, func(rng *rand.Rand, r image.Rectangle) image.Image {
		m := image.NewAlpha16(r)
		randBytes(rng, m.Pix)
		return m
	}},
	{"NYCbCrA 420", false, false, func(rng *rand.Rand, r image.Rectangle) image.Image {
		m := image.NewNYCbCrA(r, image.YCbCrSubsampleRatio420)
		randBytes(rng, m.Y)
		randBytes(rng, m.Cb)
		randBytes(rng, m.Cr)
		randBytes(rng, m.A)
		return m
	}},
	{"grayModel", true, true, func(rng *rand.Rand, r image.Rectangle) image.Image {
		m := image.NewGray(r)
		randBytes(rng, m.Pix)
		return grayModelImage{m}
	}},
	{"RGBA via At", false, true, func(rng *rand.Rand, r image.Rectangle) image.Image {
		m := image.NewNRGBA(r)
		randBytes(rng, m.Pix)
		for i := 3; i < len(m.Pix); i += 4 {
			m.Pix[i] = 255
		}
		return atOnly{m}
	}},
}

func init() {
	for _, ratio := range []image.YCbCrSubsampleRatio{
		image.YCbCrSubsampleRatio444, image.YCbCrSubsampleRatio422, image.YCbCrSubsampleRatio420,
		image.YCbCrSubsampleRatio440, image.YCbCrSubsampleRatio411, image.YCbCrSubsampleRatio410,
	} {
		stdImages = append(stdImages, stdImage{"YCbCr " + ratio.String(), false, false,
			func(rng *rand.Rand, r image.Rectangle) image.Image {
				m := image.NewYCbCr(r, ratio)
				randBytes(rng, m.Y)
				randBytes(rng, m.Cb)
				randBytes(rng, m.Cr)
				return m
			}})
	}
}

// grayModelImage is a gray image known only by its colour model.
type grayModelImage struct{ m *image.Gray }

func (g grayModelImage) ColorModel() color.Model { return color.GrayModel }
func (g grayModelImage) Bounds() image.Rectangle { return g.m.Bounds() }
func (g grayModelImage) At(x, y int) color.Color { return g.m.At(x, y) }

// atOnly hides an image's concrete type, so FromImage takes its generic path.
type atOnly struct{ image.Image }

// bridgeOracle is the decode rule of docs/semantics.md#decode per colour value, with gray kept as one channel.
func bridgeOracle(c color.Color, gray bool) []byte {
	if gray {
		if g, ok := c.(color.Gray16); ok {
			return []byte{byte(g.Y >> 8)}
		}
		return []byte{color.GrayModel.Convert(c).(color.Gray).Y}
	}
	switch c.(type) {
	case color.Alpha, color.Alpha16:
		n := color.NRGBAModel.Convert(c).(color.NRGBA)
		return []byte{n.R, n.G, n.B}
	}
	r, g, b := oracleRGB(c)
	return []byte{r, g, b}
}

// FromImage reads every standard image type by decode's rules, whole or as an odd
// sub-image, at any origin; ToImage gives it back, and a second FromImage is the identity.
func TestFromImage(t *testing.T) {
	rng := rand.New(rand.NewSource(7))
	rects := []image.Rectangle{
		image.Rect(0, 0, 1, 1),
		image.Rect(0, 0, 7, 5),
		image.Rect(0, 0, 33, 17),
		image.Rect(-5, 3, 12, 14), // a negative origin
		image.Rect(101, 203, 120, 206),
	}
	for _, st := range stdImages {
		for _, r := range rects {
			for _, sub := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s/%v/sub=%v", st.name, r, sub), func(t *testing.T) {
					src := st.make(rng, r)
					if sub {
						// An odd sub-rectangle: strided rows, odd chroma phase.
						sr := image.Rect(r.Min.X+1, r.Min.Y+1, r.Max.X-1, r.Max.Y)
						if sr.Empty() {
							t.Skip("too small for a sub-image")
						}
						s, ok := src.(interface {
							SubImage(image.Rectangle) image.Image
						})
						if !ok {
							t.Skip("no SubImage")
						}
						src = s.SubImage(sr)
					}
					checkBridge(t, src, st)
				})
			}
		}
	}
}

func checkBridge(t *testing.T, src image.Image, st stdImage) {
	t.Helper()
	b := src.Bounds()
	got := FromImage(src)
	wantC := 3
	if st.gray {
		wantC = 1
	}
	if got.W != b.Dx() || got.H != b.Dy() || got.C != wantC || got.Check() != nil {
		t.Fatalf("FromImage gave %dx%dx%d (%v), want %dx%dx%d", got.W, got.H, got.C, got.Check(), b.Dx(), b.Dy(), wantC)
	}
	for y := 0; y < got.H; y++ {
		for x := 0; x < got.W; x++ {
			want := bridgeOracle(src.At(b.Min.X+x, b.Min.Y+y), st.gray)
			for ch, w := range want {
				if g := at(got, x, y, ch); g != w {
					t.Fatalf("pixel (%d,%d) channel %d = %d, want %d (%#v)", x, y, ch, g, w, src.At(b.Min.X+x, b.Min.Y+y))
				}
			}
		}
	}
	back := got.ToImage()
	if back.Bounds() != image.Rect(0, 0, got.W, got.H) {
		t.Fatalf("ToImage bounds %v", back.Bounds())
	}
	if _, ok := back.(*image.Gray); ok != st.gray {
		t.Fatalf("ToImage gave a %T", back)
	}
	sameImage(t, FromImage(back), got)
	if st.lossless {
		for y := 0; y < got.H; y++ {
			for x := 0; x < got.W; x++ {
				r0, g0, b0, a0 := src.At(b.Min.X+x, b.Min.Y+y).RGBA()
				r1, g1, b1, a1 := back.At(x, y).RGBA()
				if r0 != r1 || g0 != g1 || b0 != b1 || a0 != a1 {
					t.Fatalf("pixel (%d,%d) came back as %v, want %v", x, y, back.At(x, y), src.At(b.Min.X+x, b.Min.Y+y))
				}
			}
		}
	}
}

// ToImage copies a strided Image of either channel count into an opaque standard image, and
// FromImage gives the same pixels back, tightly packed.
func TestToImage(t *testing.T) {
	rng := rand.New(rand.NewSource(9))
	for _, s := range testShapes {
		for _, c := range []int{1, 3} {
			t.Run(fmt.Sprintf("%vx%d", s, c), func(t *testing.T) {
				m := randImage(rng, s.w, s.h, c, s.pad)
				std := m.ToImage()
				switch std := std.(type) {
				case *image.Gray:
					if c != 1 {
						t.Fatal("a gray image for C = 3")
					}
				case *image.RGBA:
					if c != 3 || !std.Opaque() {
						t.Fatalf("C = %d gave an RGBA, opaque %v", c, std.Opaque())
					}
				default:
					t.Fatalf("ToImage gave a %T", std)
				}
				back := FromImage(std)
				if back.Stride != back.W*back.C {
					t.Errorf("FromImage stride %d, want %d", back.Stride, back.W*back.C)
				}
				sameImage(t, back, m)
				checkPadding(t, m)
			})
		}
	}
}

// An empty image becomes a 0×0 Image that Check refuses; a bad Image makes ToImage panic.
func TestBridgeEdges(t *testing.T) {
	m := FromImage(image.NewRGBA(image.Rect(3, 3, 3, 9)))
	if m.W != 0 || m.H != 0 || m.Check() == nil {
		t.Errorf("empty source gave %+v", m)
	}
	defer func() {
		if recover() == nil {
			t.Error("ToImage of a 2-channel image did not panic")
		}
	}()
	(&Image{W: 1, H: 1, C: 2, Stride: 2, Pix: make([]byte, 2)}).ToImage()
}
