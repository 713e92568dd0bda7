package progressive

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/imgpipe/imgpipe/stages/jpegturbo"
)

// benchFiles returns the progressive JPEGs of IMGPIPE_TEST_PHOTOS, or the fixtures.
func benchFiles(b *testing.B) [][]byte {
	var files [][]byte
	if dir := os.Getenv("IMGPIPE_TEST_PHOTOS"); dir != "" {
		_ = filepath.WalkDir(dir, func(path string, e fs.DirEntry, err error) error {
			if err == nil && !e.IsDir() && strings.HasSuffix(strings.ToLower(path), ".jpg") {
				if data, err := os.ReadFile(path); err == nil && progressiveFrame(data) {
					files = append(files, data)
				}
			}
			return nil
		})
	} else {
		for _, name := range []string{"progressive/p420.jpg", "progressive/p444.jpg", "progressive.jpg"} {
			files = append(files, fixture(b, name))
		}
	}
	return files
}

// BenchmarkSequential times, over a folder's progressive photos (IMGPIPE_TEST_PHOTOS) at
// each scale, libjpeg-turbo's decode of the progressive files, the rewrite alone, and the
// rewrite followed by libjpeg-turbo's decode of the sequential files. One op is the folder.
func BenchmarkSequential(b *testing.B) {
	requireTurbo(b)
	files := benchFiles(b)
	for _, denom := range []int{1, 4, 8} {
		pix := map[int][]byte{}
		decodeAll := func(data []byte) {
			hd, err := jpegturbo.DecodeHeader(data)
			if err != nil {
				b.Fatal(err)
			}
			w, h := jpegturbo.ScaledSize(hd.W, hd.H, denom)
			if len(pix[denom]) < w*h*3 {
				pix[denom] = make([]byte, w*h*3)
			}
			if err := jpegturbo.DecodeScaled(data, pix[denom], denom, w, h, w*3, jpegturbo.PixelRGB); err != nil {
				b.Fatal(err)
			}
		}
		var buf []byte
		b.Run(fmt.Sprintf("denom=%d/libjpeg-turbo", denom), func(b *testing.B) {
			for range b.N {
				for _, f := range files {
					decodeAll(f)
				}
			}
		})
		for _, then := range []string{"", "+libjpeg-turbo"} {
			b.Run(fmt.Sprintf("denom=%d/rewrite%s", denom, then), func(b *testing.B) {
				for range b.N {
					for _, f := range files {
						var err error
						if buf, err = Sequential(buf[:0], f, denom); err != nil {
							b.Fatal(err)
						}
						if then != "" {
							decodeAll(buf)
						}
					}
				}
			})
		}
	}
}
