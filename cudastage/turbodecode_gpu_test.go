package cudastage

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/imgpipe/imgpipe/cudastage/cu"
	"github.com/imgpipe/imgpipe/cudastage/sched"
	"github.com/imgpipe/imgpipe/stages"
	"github.com/imgpipe/imgpipe/stages/jpegturbo"
)

// GPU tests of the turbo-cuda decoder: libjpeg-turbo's bytes, for every file it takes.

// turboDevice opens the GPU for turbo-cuda tests, which compare with libjpeg-turbo on the CPU.
func turboDevice(t *testing.T) *Device {
	t.Helper()
	if err := jpegturbo.Available(); err != nil {
		t.Skipf("libjpeg-turbo, the reference, is missing: %v", err)
	}
	return testDevice(t)
}

// turboFixtures are baseline JPEGs of every sampling libjpeg-turbo's API takes (and 4:1:0,
// which turbo-cuda leaves to the CPU), odd sizes,
// gray, EXIF orientations, restart markers, and the photos of IMGPIPE_TEST_PHOTOS when set.
func turboFixtures(t *testing.T) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	for _, pattern := range []string{"../stages/testdata/sub4*.jpg", "../stages/testdata/orient_*.jpg", "jpegdec/testdata/*.jpg"} {
		paths, _ := filepath.Glob(pattern)
		for _, p := range paths {
			files[filepath.Base(p)] = readFixture(t, p)
		}
	}
	for _, sz := range [][2]int{{1, 1}, {2, 3}, {7, 3}, {17, 1}, {33, 17}, {640, 481}} {
		for _, gray := range []bool{false, true} {
			name := fmt.Sprintf("go-%dx%d-gray=%v", sz[0], sz[1], gray)
			files[name] = goJPEG(t, sz[0], sz[1], gray)
		}
	}
	if dir := os.Getenv("IMGPIPE_TEST_PHOTOS"); dir != "" {
		paths, _ := filepath.Glob(filepath.Join(dir, "*", "*.jpg"))
		for _, p := range paths {
			files[filepath.Base(p)] = readFixture(t, p)
		}
	}
	return files
}

// TestTurboDecodeExact decodes every fixture the turbo-cuda decoder takes in one call per DCT
// scale and compares its bytes with libjpeg-turbo's at that scale (orientation applied by
// both; on sides of a few pixels libjpeg-turbo applies a larger scale of the same size, and so
// does turbo-cuda). nvJPEG, which does not scale, refuses a scaled image.
func TestTurboDecodeExact(t *testing.T) {
	d := turboDevice(t)
	var allNames []string
	var all [][]byte
	for name, f := range turboFixtures(t) {
		if d.TurboRoute(f) != sched.RouteTurbo {
			if strings.HasPrefix(name, "sub4") && name != "sub410.jpg" || strings.HasPrefix(name, "go-") || strings.HasPrefix(name, "orient_") {
				t.Errorf("%s: not taken by %s", name, sched.RouteTurbo)
			}
			continue
		}
		allNames, all = append(allNames, name), append(all, f)
	}
	nvFile := goJPEG(t, 64, 48, false) // routed to nvJPEG, which must refuse it when scaled
	for _, scale := range jpegturbo.ScaleDenoms {
		t.Run(fmt.Sprintf("1/%d", scale), func(t *testing.T) {
			// A file libjpeg-turbo decodes at a scale turbo-cuda has not (3/8, 5/8: sides of a
			// few pixels) is left to the CPU (jpegturbo.AppliedDenom).
			var names []string
			var files [][]byte
			for i, f := range all {
				if hd, err := stages.DecodeHeader(f, stages.DecodeOptions{}); err == nil {
					if _, ok := jpegturbo.AppliedDenom(hd.W, hd.H, scale); ok {
						names, files = append(names, allNames[i]), append(files, f)
					}
				}
			}
			routes := slices.Repeat([]string{sched.RouteTurbo}, len(files))
			imgs, out := decodeOnDevice(t, d, append(files, nvFile), append(routes, sched.RouteHW), scale)
			if nv := imgs[len(files)]; scale > 1 && (nv.Err == nil || !strings.Contains(nv.Err.Error(), "DCT scale")) {
				t.Errorf("%s at 1/%d: %v, want a refusal", sched.RouteHW, scale, nv.Err)
			}
			for i, im := range imgs[:len(files)] {
				if im.Err != nil {
					t.Errorf("%s: %v", names[i], im.Err)
					continue
				}
				opt := stages.DecodeOptions{Orient: true, JPEG: stages.JPEGTurbo, Scale: func(int, int) int { return scale }}
				want, err := stages.Decode(files[i], opt, nil)
				if err != nil {
					t.Errorf("%s: libjpeg-turbo: %v", names[i], err)
					continue
				}
				if !bytes.Equal(out[i], want.Pix) {
					mean, most := diff(out[i], want.Pix)
					t.Errorf("%s (%dx%d): differs from libjpeg-turbo (mean %.3f, max %d)", names[i], im.Shape.W, im.Shape.H, mean, most)
				}
			}
			t.Logf("%d files, every one libjpeg-turbo's bytes (%d left to the CPU)", len(files), len(all)-len(files))
		})
	}
}

// TestTurboDecodeDamaged damages the scans of a small fixture (which libjpeg-turbo decodes on its
// slow path, which warns of bad codes) and of a 640x481 photo (whose first MCUs go through its
// fast path, which does not) in many ways, and checks that turbo-cuda and libjpeg-turbo fail the
// same files. Files both decode must mostly have the same bytes: where damage makes coefficients
// overflow the 16-bit arithmetic of libjpeg-turbo's SIMD IDCT, its pixels differ from its own C
// code's, and turbo-cuda follows neither exactly.
func TestTurboDecodeDamaged(t *testing.T) {
	d := turboDevice(t)
	bases := [][]byte{readFixture(t, "../stages/testdata/sub420.jpg"), goJPEG(t, 640, 481, false)}
	rng := rand.New(rand.NewPCG(7, 8))
	var files [][]byte
	var kinds []string
	for len(files) < 120 {
		kind := len(files) / 2 % 3
		base := bases[len(files)%2]
		sos := bytes.Index(base, []byte{0xFF, 0xDA})
		f := bytes.Clone(base)
		start := sos + 14
		switch kind {
		case 0: // a few flipped bytes
			for range 1 + rng.IntN(3) {
				f[start+rng.IntN(len(f)-start-2)] ^= byte(1 + rng.IntN(255))
			}
		case 1: // the scan cut short, EOI kept
			cut := start + rng.IntN(len(f)-start-2)
			f = append(f[:cut:cut], 0xFF, 0xD9)
		case 2: // junk after the scan
			f = append(f[:len(f)-2:len(f)-2], append(bytes.Repeat([]byte{0x5A}, 1+rng.IntN(20)), 0xFF, 0xD9)...)
		}
		if d.TurboRoute(f) == sched.RouteTurbo {
			files = append(files, f)
			kinds = append(kinds, fmt.Sprintf("%s, %d bytes", []string{"flipped bytes", "cut short", "junk after the scan"}[kind], len(f)))
		}
	}
	routes := make([]string, len(files))
	for i := range routes {
		routes[i] = sched.RouteTurbo
	}
	imgs, out := decodeOnDevice(t, d, files, routes, 1)
	var failed, differ int
	for i, im := range imgs {
		want, err := stages.Decode(files[i], stages.DecodeOptions{Orient: true, JPEG: stages.JPEGTurbo}, nil)
		switch {
		case (err != nil) != (im.Err != nil):
			t.Errorf("file %d (%s): libjpeg-turbo says %v, turbo-cuda %v", i, kinds[i], err, im.Err)
		case err != nil:
			failed++
		case !bytes.Equal(out[i], want.Pix) && strings.HasPrefix(kinds[i], "flipped"):
			differ++
		case !bytes.Equal(out[i], want.Pix): // sound data, cut or followed by junk: exact
			t.Errorf("file %d (%s): decoded by both, with other bytes", i, kinds[i])
		}
	}
	t.Logf("%d damaged files: %d failed on both; of the rest, %d with flipped bytes decoded to other bytes", len(files), failed, differ)
	if decoded := len(files) - failed; differ*3 > decoded {
		t.Errorf("%d of %d damaged files that both decode have other bytes", differ, decoded)
	}
}

// envTestGPUMemory, set to 1, runs TestTurboOutOfMemory, which takes nearly all of the GPU's
// memory: run it alone, not beside other GPU tests.
const envTestGPUMemory = "IMGPIPE_TEST_GPU_MEMORY"

// TestTurboOutOfMemory leaves turbo-cuda a little device memory, then decodes a call whose
// passes need more: they shrink until they fit, every image that fits alone is libjpeg-turbo's,
// and one that does not fails alone with that reason (turboPasses on a real GPU).
func TestTurboOutOfMemory(t *testing.T) {
	if os.Getenv(envTestGPUMemory) != "1" {
		t.Skipf("takes nearly all of the GPU's memory: run alone with %s=1", envTestGPUMemory)
	}
	d := turboDevice(t)
	small, big := goJPEG(t, 1024, 768, false), goJPEG(t, 6000, 4000, false)
	// Warm up: the kernels load, and the stream's buffers exist, before memory runs short.
	if imgs, _ := decodeOnDevice(t, d, [][]byte{small}, []string{sched.RouteTurbo}, 1); imgs[0].Err != nil {
		t.Fatal(imgs[0].Err)
	}
	// In 4:2:0, 4.5 bytes a pixel and a quarter more of room: 60 small images need about 265 MB
	// in one pass and the big one alone 135 MB, more than is left, which 15 small ones fit in.
	files := slices.Repeat([][]byte{small}, 60)
	files[30] = big
	routes := slices.Repeat([]string{sched.RouteTurbo}, len(files))
	const leave = 100 << 20
	var s sched.Stream
	if err := d.g.Do(func() (err error) { s, err = d.NewStream(); return err }); err != nil {
		t.Fatal(err)
	}
	defer d.g.Do(func() error { return d.DestroyStream(s) })
	imgs, out, err := decodeFiles(d, s, files, routes, 1, func(n int) cu.DevicePtr {
		dst := devMem(t, d.g, uint64(n))
		free, _, err := cu.MemGetInfo()
		if err != nil || free < leave {
			t.Fatalf("free device memory %d (%v)", free, err)
		}
		devMem(t, d.g, free-leave)
		return dst
	})
	if err != nil {
		t.Fatalf("a device error instead of smaller passes: %v", err)
	}
	want, err := stages.Decode(small, stages.DecodeOptions{JPEG: stages.JPEGTurbo}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i, im := range imgs {
		switch {
		case i == 30:
			if im.Err == nil || !strings.Contains(im.Err.Error(), "does not fit") {
				t.Errorf("the 6000x4000 image in %d MB: %v, want a failure of its own", leave>>20, im.Err)
			}
		case im.Err != nil:
			t.Errorf("image %d: %v", i, im.Err)
		case !bytes.Equal(out[i], want.Pix):
			t.Errorf("image %d: differs from libjpeg-turbo", i)
		}
	}
}
