package cudastage

import (
	"bytes"
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/imgpipe/imgpipe/cudastage/cu"
	"github.com/imgpipe/imgpipe/cudastage/cutest"
	"github.com/imgpipe/imgpipe/cudastage/sched"
	"github.com/imgpipe/imgpipe/stages"
	"github.com/imgpipe/imgpipe/stages/jpegturbo"
)

// GPU tests of the device's JPEG decoding (nvJPEG) and of the orientation
// kernel.

// Bounds of nvJPEG's pixels against the CPU reference (libjpeg-turbo when
// it loads, else Go's decoder), per fixture: mean and largest absolute
// difference over all samples. The test prints the measured figures.
const (
	maxMeanDiff = 3.0
	maxAbsDiff  = 96
)

// TestOrientKernel: the kernel gives orientRef's bytes (which
// TestOrientMapping ties to stages) for every orientation and odd sizes.
func TestOrientKernel(t *testing.T) {
	g, err := OpenGPU(cutest.Require(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() }) // after devMem's cleanups, which need the GPU
	rng := rand.New(rand.NewPCG(3, 4))
	err = g.Do(func() error {
		k := testKernels(t)
		defer k.Unload()
		for _, sz := range [][2]int{{1, 1}, {1, 7}, {7, 1}, {33, 21}, {4000, 3}, {257, 129}} {
			sw, sh := sz[0], sz[1]
			n := 3 * sw * sh
			src := make([]byte, n)
			for i := range src {
				src[i] = byte(rng.Uint32())
			}
			in, out := devMem(t, g, uint64(n)), devMem(t, g, uint64(n))
			if err := cu.MemcpyHtoD(in, src); err != nil {
				return err
			}
			for o := 2; o <= 8; o++ {
				if err := k.Orient(0, in, sw, sh, out, o); err != nil {
					return err
				}
				got := make([]byte, n)
				if err := cu.MemcpyDtoH(got, out); err != nil { // synchronous: after the kernel
					return err
				}
				if !bytes.Equal(got, orientRef(src, sw, sh, o)) {
					t.Errorf("%dx%d orientation %d: differs from the reference", sw, sh, o)
				}
			}
			if err := k.Orient(0, in, sw, sh, in, 3); err == nil {
				t.Error("an in-place orientation was queued")
			}
		}
		if err := k.Orient(0, 1, 0, 1, 2, 2); err == nil {
			t.Error("a 0x1 image was queued")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// testDevice opens the GPU (cutest.Require) as a Device, closed when the test ends.
func testDevice(t testing.TB) *Device {
	t.Helper()
	d, closeDev, err := Open(cutest.Require(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := closeDev(); err != nil {
			t.Error(err)
		}
	})
	// Open, as an executor's BindThread leaves it: tests call its methods directly.
	if err := d.OpenErr(); err != nil {
		t.Fatal(err)
	}
	return d
}

// jpegDevice opens the test GPU as a Device with nvJPEG, or skips (fails
// under IMGPIPE_REQUIRE_GPU=1) when nvJPEG is missing.
func jpegDevice(t testing.TB) *Device {
	t.Helper()
	d := testDevice(t)
	if err := d.DecoderAvailable(); err != nil {
		if cutest.Required() {
			t.Fatalf("nvJPEG required on the GPU machine: %v", err)
		}
		t.Skip(err)
	}
	c, _ := d.jpeg()
	t.Logf("nvJPEG: %d engines × %d cores, batch capacity %d (hardware backend: %v)", c.engines, c.cores, c.capacity, c.hwErr)
	return d
}

// decodeOnDevice decodes files as the executor would (see decodeFiles), with
// one Decode call on a fresh stream.
func decodeOnDevice(t *testing.T, d *Device, files [][]byte, route []string, scale int) ([]sched.DecodeImage, [][]byte) {
	t.Helper()
	var s sched.Stream
	if err := d.g.Do(func() (err error) { s, err = d.NewStream(); return err }); err != nil {
		t.Fatal(err)
	}
	defer d.g.Do(func() error { return d.DestroyStream(s) })
	imgs, out, err := decodeFiles(d, s, files, route, scale, func(n int) cu.DevicePtr { return devMem(t, d.g, uint64(n)) })
	if err != nil {
		t.Fatal(err)
	}
	return imgs, out
}

// decodeFiles decodes files with one Decode call on stream s, as the executor
// would: routes from DecodeRoute (or route[i], when set), data in page-locked
// memory, shapes from stages' header at DCT scale 1/scale (applied as
// libjpeg-turbo does: jpegturbo.AppliedDenom), the images into dst(total
// bytes), called on the GPU's bound thread. It returns the images, each with
// its Err, and every image's pixels.
func decodeFiles(d *Device, s sched.Stream, files [][]byte, route []string, scale int, dst func(n int) cu.DevicePtr) ([]sched.DecodeImage, [][]byte, error) {
	imgs := make([]sched.DecodeImage, len(files))
	var total int
	for i, f := range files {
		hd, err := stages.DecodeHeader(f, stages.DecodeOptions{Orient: true})
		if err != nil {
			return nil, nil, fmt.Errorf("file %d: header: %w", i, err)
		}
		w, h := jpegturbo.ScaledSize(hd.W, hd.H, scale)
		idct, ok := jpegturbo.AppliedDenom(hd.W, hd.H, scale)
		if !ok {
			return nil, nil, fmt.Errorf("file %d: libjpeg-turbo decodes %dx%d at 1/%d at a scale turbo-cuda has not", i, hd.W, hd.H, scale)
		}
		imgs[i] = sched.DecodeImage{Shape: sched.Shape{W: w, H: h, C: 3}, Orient: hd.Orientation, Scale: idct, DstOff: total, Decoder: d.DecodeRoute(f)}
		if route != nil && route[i] != "" {
			imgs[i].Decoder = route[i]
		}
		total += 3 * w * h
	}
	out := make([][]byte, len(files))
	err := d.g.Do(func() error {
		base := dst(total) // on the bound thread: devMem allocates there
		for i, f := range files {
			p, err := cu.MemHostAlloc(len(f))
			if err != nil {
				return err
			}
			defer cu.MemFreeHost(p)
			copy(p, f)
			imgs[i].Data = p
		}
		if err := d.Decode(s, &sched.DecodeCall{Images: imgs, Dst: sched.DevPtr(base)}); err != nil {
			return err
		}
		if err := d.SyncStream(s); err != nil {
			return err
		}
		for i, im := range imgs {
			out[i] = make([]byte, 3*im.Shape.W*im.Shape.H)
			if err := cu.MemcpyDtoH(out[i], base+cu.DevicePtr(im.DstOff)); err != nil {
				return err
			}
		}
		return nil
	})
	return imgs, out, err
}

// cpuDecode decodes file on the CPU with Go's decoder, whose chroma upsampling
// (replication) nvJPEG's matches; libjpeg-turbo's smooth upsampling differs
// by up to 16 on average on these fixtures' sharp colour edges (measured on
// an H100), and by 0.12 on photos (TestGPUDecodeThenExact in cmd/imgpipe).
func cpuDecode(t *testing.T, file []byte) (*stages.Image, string) {
	t.Helper()
	m, err := stages.Decode(file, stages.DecodeOptions{Orient: true, JPEG: stages.JPEGGo}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return m, string(stages.JPEGGo)
}

// diff returns the mean and largest absolute difference of two sample arrays.
func diff(a, b []byte) (mean float64, most int) {
	var sum int
	for i := range a {
		d := int(a[i]) - int(b[i])
		d = max(d, -d)
		sum += d
		most = max(most, d)
	}
	return float64(sum) / float64(len(a)), most
}

// goJPEG encodes a w×h picture with Go's image/jpeg (4:2:0 for colour).
func goJPEG(t *testing.T, w, h int, gray bool) []byte {
	t.Helper()
	rng := rand.New(rand.NewPCG(uint64(w), uint64(h)))
	var m image.Image
	if gray {
		g := image.NewGray(image.Rect(0, 0, w, h))
		for i := range g.Pix {
			g.Pix[i] = byte(i%w*255/max(w-1, 1)) ^ byte(rng.IntN(8))
		}
		m = g
	} else {
		c := image.NewRGBA(image.Rect(0, 0, w, h))
		for y := range h {
			for x := range w {
				c.SetRGBA(x, y, color.RGBA{byte(x * 255 / max(w-1, 1)), byte(y * 255 / max(h-1, 1)), byte(rng.IntN(64) + 96), 255})
			}
		}
		m = c
	}
	var buf bytes.Buffer
	if err := jpeg.Encode(&buf, m, &jpeg.Options{Quality: 90}); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func readFixture(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestDecodeFixtures decodes every fixture on the device, checks its route
// and its pixels against the CPU reference within the bounds, and prints the
// measured differences. hw is the route when the GPU has engines; files the
// engines cannot take must not be routed to them.
func TestDecodeFixtures(t *testing.T) {
	d := jpegDevice(t)
	c, _ := d.jpeg()
	hw := sched.RouteHW
	if c.hw == nil {
		hw = sched.RouteCUDA
	}
	st := func(name string) string { return filepath.Join("..", "stages", "testdata", name) }
	nv := func(name string) string { return filepath.Join("nvjpeg", "testdata", name) }
	type fixture struct {
		name   string
		data   []byte
		routes []string // acceptable routes
	}
	var fx []fixture
	add := func(name string, data []byte, routes ...string) { fx = append(fx, fixture{name, data, routes}) }
	add("go 4:2:0 640x480", goJPEG(t, 640, 480, false), hw)
	add("go gray 333x207", goJPEG(t, 333, 207, true), hw)
	add("go 1x1", goJPEG(t, 1, 1, false), hw, sched.RouteCUDA)
	add("go 4000x3", goJPEG(t, 4000, 3, false), hw, sched.RouteCUDA)
	add("go 3x4000", goJPEG(t, 3, 4000, false), hw, sched.RouteCUDA)
	for _, n := range []string{"base444.jpg", "base422.jpg", "restart_rows.jpg", "restart_blocks.jpg"} {
		add(n, readFixture(t, nv(n)), hw)
	}
	for _, n := range []string{"sub444.jpg", "sub422.jpg", "sub420.jpg", "sub440.jpg"} {
		add(n, readFixture(t, st(n)), hw, sched.RouteCUDA)
	}
	for _, n := range []string{"sub411.jpg", "sub410.jpg", "progressive.jpg", "progressive_gray.jpg"} {
		add(n, readFixture(t, st(n)), sched.RouteCUDA, "") // never the engines
	}
	add("cmyk.jpg", readFixture(t, st("cmyk.jpg")), "") // the CPU's Adobe-aware conversion
	for o := 1; o <= 8; o++ {
		n := fmt.Sprintf("orient_%d.jpg", o)
		add(n, readFixture(t, st(n)), hw, sched.RouteCUDA)
	}
	var files [][]byte
	for _, f := range fx {
		files = append(files, f.data)
	}
	imgs, got := decodeOnDevice(t, d, files, nil, 1)
	for i, f := range fx {
		im := imgs[i]
		ok := false
		for _, r := range f.routes {
			ok = ok || im.Decoder == r
		}
		if !ok {
			t.Errorf("%s: route %q, want one of %q", f.name, im.Decoder, f.routes)
			continue
		}
		if im.Decoder == "" {
			t.Logf("%-22s route \"\" (the CPU decodes it)", f.name)
			continue
		}
		if im.Err != nil {
			t.Errorf("%s (%s): %v", f.name, im.Decoder, im.Err)
			continue
		}
		ref, backend := cpuDecode(t, f.data)
		if ref.W != im.Shape.W || ref.H != im.Shape.H {
			t.Fatalf("%s: reference %dx%d, device %dx%d", f.name, ref.W, ref.H, im.Shape.W, im.Shape.H)
		}
		mean, most := diff(got[i], ref.Pix)
		t.Logf("%-22s %-11s %4dx%-4d vs %s: mean |diff| %.3f, max %d", f.name, im.Decoder, ref.W, ref.H, backend, mean, most)
		if mean > maxMeanDiff || most > maxAbsDiff {
			t.Errorf("%s: mean %.3f (bound %.1f), max %d (bound %d)", f.name, mean, maxMeanDiff, most, maxAbsDiff)
		}
	}
}

// TestDecodeBadFilesIsolated: corrupt and truncated files in the middle of a
// batch fail alone, with nvJPEG's reason; their batch-mates decode as when
// alone. Files that are not JPEG are routed to the CPU.
func TestDecodeBadFilesIsolated(t *testing.T) {
	d := jpegDevice(t)
	good := goJPEG(t, 320, 240, false)
	truncated := good[:len(good)*2/3]
	corrupt := bytes.Clone(good)
	// Garbage in the entropy-coded data, past the headers: the parse
	// succeeds, the decode must not.
	sos := bytes.Index(corrupt, []byte{0xFF, 0xDA})
	for i := sos + 20; i < len(corrupt)-2; i += 7 {
		corrupt[i] = 0xFF
	}
	files := [][]byte{good, goJPEG(t, 64, 48, true), truncated, good, corrupt, goJPEG(t, 99, 77, false)}
	route := []string{"", "", sched.RouteHW, "", sched.RouteHW, ""}
	c, _ := d.jpeg()
	if c.hw == nil {
		route = []string{"", "", sched.RouteCUDA, "", sched.RouteCUDA, ""}
	}
	imgs, got := decodeOnDevice(t, d, files, route, 1)
	alone, aloneGot := decodeOnDevice(t, d, [][]byte{good}, nil, 1)
	if alone[0].Err != nil {
		t.Fatal(alone[0].Err)
	}
	for i, im := range imgs {
		bad := i == 2 || i == 4
		switch {
		case bad && im.Err == nil:
			t.Errorf("file %d (bad, %s) decoded without error", i, im.Decoder)
		case bad:
			t.Logf("file %d (%s): %v", i, im.Decoder, im.Err)
		case im.Err != nil:
			t.Errorf("file %d (good, %s) failed with a bad batch-mate: %v", i, im.Decoder, im.Err)
		case i == 0 || i == 3:
			if !bytes.Equal(got[i], aloneGot[0]) {
				t.Errorf("file %d: pixels differ from the same file decoded alone", i)
			}
		}
	}
	var pngBuf bytes.Buffer
	if err := png.Encode(&pngBuf, image.NewGray(image.Rect(0, 0, 4, 4))); err != nil {
		t.Fatal(err)
	}
	for name, f := range map[string][]byte{"png": pngBuf.Bytes(), "empty": nil, "soi only": {0xFF, 0xD8}, "truncated header": good[:40]} {
		if r := d.DecodeRoute(f); r != "" {
			t.Errorf("%s: route %q, want \"\"", name, r)
		}
	}
}
