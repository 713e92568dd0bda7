package cudastage

import (
	"cmp"
	"encoding/binary"
	"errors"
	"os"
	"slices"
	"sync"
	"testing"

	"github.com/imgpipe/imgpipe/cudastage/cu"
	"github.com/imgpipe/imgpipe/cudastage/jpegdec"
	"github.com/imgpipe/imgpipe/cudastage/sched"
	"github.com/imgpipe/imgpipe/stages/jpegturbo"
)

// TestJPEGRecordSizes: the Go mirrors of kernels/jpegdec.cu's structs have the sizes the
// layout code and the kernels assume.
func TestJPEGRecordSizes(t *testing.T) {
	for _, c := range []struct {
		name      string
		got, want int
	}{
		{"JImg", binary.Size(jpegImg{}), jpegImgBytes},
		{"JTab", binary.Size(jpegdec.Table{}), jpegTabBytes},
		{"JSeg", binary.Size(jpegSeg{}), jpegSegBytes},
		{"JCtx", binary.Size(jpegCtx{}), jpegCtxBytes},
	} {
		if c.got != c.want {
			t.Errorf("%s: %d bytes, want %d", c.name, c.got, c.want)
		}
	}
	// The host reads the flag every jpegRoundsPerCheck rounds, and must read it at the last.
	if jpegMaxRounds%jpegRoundsPerCheck != 0 {
		t.Errorf("jpegMaxRounds %d is not a multiple of jpegRoundsPerCheck %d", jpegMaxRounds, jpegRoundsPerCheck)
	}
}

// TestJPEGGeometry: output sizes are libjpeg-turbo's scaled sizes, each sampling gets the
// upsampler jdsample.c picks for it at each scale, and the component planes cover the output.
func TestJPEGGeometry(t *testing.T) {
	comps := func(h, v int) []jpegdec.Component {
		return []jpegdec.Component{{H: h, V: v}, {H: 1, V: 1}, {H: 1, V: 1}}
	}
	for _, c := range []struct {
		name  string
		h, v  int
		gray  bool
		denom int
		up    [3]int32
	}{
		{"4:4:4", 1, 1, false, 1, [3]int32{upFull, upFull, upFull}},
		{"4:2:0", 2, 2, false, 1, [3]int32{upFull, upH2V2Fancy, upH2V2Fancy}},
		{"4:2:0 at 1/2", 2, 2, false, 2, [3]int32{upFull, upFull, upFull}},
		{"4:2:0 at 1/8", 2, 2, false, 8, [3]int32{upFull, upFull, upFull}},
		{"4:2:2", 2, 1, false, 1, [3]int32{upFull, upH2V1Fancy, upH2V1Fancy}},
		{"4:2:2 at 1/8", 2, 1, false, 8, [3]int32{upFull, upH2V1, upH2V1}},
		{"4:4:0", 1, 2, false, 1, [3]int32{upFull, upH1V2Fancy, upH1V2Fancy}},
		{"4:4:0 at 1/8", 1, 2, false, 8, [3]int32{upFull, upInt, upInt}},
		{"4:1:1", 4, 1, false, 1, [3]int32{upFull, upInt, upInt}},
		{"gray", 1, 1, true, 4, [3]int32{upFull}},
	} {
		for _, sz := range [][2]int{{1, 1}, {3, 2}, {17, 9}, {1001, 667}} {
			f := &jpegdec.Frame{Width: sz[0], Height: sz[1], Comps: comps(c.h, c.v), HMax: c.h, VMax: c.v}
			if c.gray {
				f.Comps, f.HMax, f.VMax = f.Comps[:1], 1, 1
			}
			f.MCUsX, f.MCUsY = (sz[0]+8*f.HMax-1)/(8*f.HMax), (sz[1]+8*f.VMax-1)/(8*f.VMax)
			var g jpegImg
			if err := jpegGeometry(&g, f, c.denom); err != nil {
				t.Errorf("%s %v: %v", c.name, sz, err)
				continue
			}
			w, h := jpegturbo.ScaledSize(sz[0], sz[1], c.denom)
			if int(g.OW) != w || int(g.OH) != h || int(g.PW[0]) < w || int(g.PH[0]) < h {
				t.Errorf("%s %v: output %dx%d, luma plane %dx%d, libjpeg-turbo's %dx%d", c.name, sz, g.OW, g.OH, g.PW[0], g.PH[0], w, h)
			}
			want := c.up
			if sz[0] <= 4 && want[1] == upH2V2Fancy { // jdsample.c: fancy only for more than 2 chroma columns
				want[1], want[2] = upH2V2, upH2V2
			}
			if sz[0] <= 4 && want[1] == upH2V1Fancy {
				want[1], want[2] = upH2V1, upH2V1
			}
			if g.Up != want {
				t.Errorf("%s %v: upsamplers %v, want %v", c.name, sz, g.Up, want)
			}
		}
	}
}

// TestTurboRoute: turbo-cuda takes the baseline JPEGs of every sampling it decodes and leaves
// the rest, and the route is safe to ask from many decode workers at once (no GPU needed).
func TestTurboRoute(t *testing.T) {
	var d Device
	cases := []struct {
		file, want string
	}{
		{"sub420.jpg", sched.RouteTurbo}, {"sub422.jpg", sched.RouteTurbo}, {"sub444.jpg", sched.RouteTurbo},
		{"sub440.jpg", sched.RouteTurbo}, {"sub411.jpg", sched.RouteTurbo}, {"orient_6.jpg", sched.RouteTurbo},
		{"sub410.jpg", ""}, {"progressive.jpg", ""}, {"cmyk.jpg", ""}, {"arith/arith420.jpg", ""},
		{"lossy.webp", ""}, {"lzw.tif", ""},
	}
	files := make([][]byte, len(cases))
	for i, c := range cases {
		b, err := os.ReadFile("../stages/testdata/" + c.file)
		if err != nil {
			t.Fatal(err)
		}
		files[i] = b
	}
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i, c := range cases {
				if got := d.TurboRoute(files[i]); got != c.want {
					t.Errorf("%s: route %q, want %q", c.file, got, c.want)
				}
			}
		}()
	}
	wg.Wait()
	if got := d.TurboRoute(nil); got != "" {
		t.Errorf("no bytes: route %q", got)
	}
}

// TestTurboPasses: passes follow jpegChunkBytes; out of memory halves them (for the rest of the
// call too) after giving the memory back, an image that does not fit alone fails alone, and
// other errors end the call.
func TestTurboPasses(t *testing.T) {
	oom := &cu.Error{Call: "cuMemAlloc", Code: cu.ErrorOutOfMemory}
	other := errors.New("launch failed")
	big := jpegChunkBytes / 3 // three images fill a pass
	for _, tc := range []struct {
		name     string
		n        int
		fits     int   // most images a pass holds before running out of memory
		tooBig   int   // an image that never fits (-1: none)
		failWith error // a pass of the image tooBig fails so (default oom)
		passes   []int // images per pass that succeeded or failed, in order
		failed   []int
		releases int
		err      error
	}{
		{"chunked", 7, 99, -1, nil, []int{3, 3, 1}, nil, 0, nil},
		{"halved for the rest", 7, 1, -1, nil, []int{3, 1, 1, 1, 1, 1, 1, 1}, nil, 1, nil},
		{"nothing fits", 3, 0, -1, nil, []int{3, 1, 1, 1}, []int{0, 1, 2}, 4, nil},
		{"one too big", 5, 99, 4, nil, []int{3, 2, 1, 1}, []int{4}, 2, nil},
		{"another error", 5, 99, 1, other, []int{3}, nil, 0, other},
	} {
		var passes, failed []int
		releases := 0
		pass := func(idx []int) error {
			passes = append(passes, len(idx))
			for _, i := range idx {
				if i == tc.tooBig {
					return cmp.Or(tc.failWith, error(oom))
				}
			}
			if len(idx) > tc.fits {
				return oom
			}
			return nil
		}
		idx := make([]int, tc.n)
		for i := range idx {
			idx[i] = i
		}
		err := turboPasses(idx, func(int) int { return big }, pass,
			func() error { releases++; return nil }, func(i int, err error) { failed = append(failed, i) })
		if !errors.Is(err, tc.err) || !slices.Equal(passes, tc.passes) || !slices.Equal(failed, tc.failed) || releases != tc.releases {
			t.Errorf("%s: passes %v, failed %v, %d releases, error %v; want %v, %v, %d, %v",
				tc.name, passes, failed, releases, err, tc.passes, tc.failed, tc.releases, tc.err)
		}
	}
}
