// Command gen draws the sample images in samples/images.
//
// Every sample is synthetic, made by this program from a fixed seed, so the
// project owns them outright (see samples/LICENSE). Run it from the repository
// root with `go run ./samples/gen`; the output is deterministic.
package main

import (
	"image"
	"image/color"
	"image/gif"
	"image/jpeg"
	"image/png"
	"log"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
)

func main() {
	dir := filepath.Join("samples", "images")
	r := rand.New(rand.NewPCG(1, 2))
	write(filepath.Join(dir, "sunset.jpg"), scene(640, 427, r, 0.0), "jpeg")
	write(filepath.Join(dir, "meadow.jpg"), scene(512, 341, r, 2.1), "jpeg")
	write(filepath.Join(dir, "tiles.png"), tiles(301, 203), "png")
	write(filepath.Join(dir, "night/stars.png"), stars(257, 129, r), "png")
	write(filepath.Join(dir, "night/moon.gif"), moon(160, 160), "gif")
	write(filepath.Join(dir, "night/harbour.jpg"), scene(480, 320, r, 4.2), "jpeg")
}

// scene is a sky gradient over rolling hills with soft noise, so blur and
// histograms have something real-looking to work on.
func scene(w, h int, r *rand.Rand, phase float64) *image.RGBA {
	m := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			fx, fy := float64(x)/float64(w), float64(y)/float64(h)
			hill := 0.6 + 0.1*math.Sin(fx*7+phase) + 0.05*math.Sin(fx*23+2*phase)
			var c [3]float64
			if fy < hill {
				c = [3]float64{250 - 120*fy, 140 + 60*math.Sin(phase+fy*2), 90 + 150*fy}
			} else {
				c = [3]float64{40 + 30*fx, 110 + 60*(1-fy), 50 + 20*math.Cos(fx*9)}
			}
			n := r.NormFloat64() * 6
			m.SetRGBA(x, y, color.RGBA{clamp(c[0] + n), clamp(c[1] + n), clamp(c[2] + n), 255})
		}
	}
	return m
}

func tiles(w, h int) *image.NRGBA {
	m := image.NewNRGBA(image.Rect(0, 0, w, h))
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			t := uint8(((x / 20) + (y / 20)) % 2 * 200)
			// Semi-transparent corner: decode must drop alpha and keep the colour.
			a := uint8(255)
			if x < w/4 && y < h/4 {
				a = 96
			}
			m.SetNRGBA(x, y, color.NRGBA{t, uint8(x), uint8(y), a})
		}
	}
	return m
}

func stars(w, h int, r *rand.Rand) *image.Gray {
	m := image.NewGray(image.Rect(0, 0, w, h))
	for i := range m.Pix {
		m.Pix[i] = uint8(r.IntN(24))
	}
	for range 150 {
		m.SetGray(r.IntN(w), r.IntN(h), color.Gray{uint8(180 + r.IntN(76))})
	}
	return m
}

func moon(w, h int) *image.Paletted {
	pal := color.Palette{color.RGBA{10, 10, 40, 255}, color.RGBA{230, 230, 200, 255}, color.RGBA{160, 160, 140, 255}}
	m := image.NewPaletted(image.Rect(0, 0, w, h), pal)
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			dx, dy := float64(x-w/2), float64(y-h/2)
			switch d := math.Hypot(dx, dy); {
			case d < 50 && math.Hypot(dx-12, dy+8) < 9:
				m.SetColorIndex(x, y, 2)
			case d < 50:
				m.SetColorIndex(x, y, 1)
			}
		}
	}
	return m
}

func clamp(v float64) uint8 { return uint8(math.Max(0, math.Min(255, math.Round(v)))) }

func write(path string, m image.Image, format string) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		log.Fatal(err)
	}
	f, err := os.Create(path)
	if err != nil {
		log.Fatal(err)
	}
	switch format {
	case "jpeg":
		err = jpeg.Encode(f, m, &jpeg.Options{Quality: 88})
	case "png":
		err = png.Encode(f, m)
	case "gif":
		err = gif.Encode(f, m, nil)
	}
	if err != nil {
		log.Fatal(err)
	}
	if err := f.Close(); err != nil {
		log.Fatal(err)
	}
}
