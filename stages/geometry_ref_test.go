package stages

import (
	"errors"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The geometry stages against outside references (OpenCV, Pillow, numpy),
// through testdata/geometry_ref.py. The tests skip, saying why, when Python
// or a module is missing (.ci/run installs Debian's python3-opencv,
// python3-pil and python3-numpy).

// refPython is the interpreter the references run on: $IMGPIPE_PYTHON, else
// Debian's /usr/bin/python3 (where apt puts the modules), else python3.
func refPython(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("IMGPIPE_PYTHON"); p != "" {
		return p
	}
	if _, err := os.Stat("/usr/bin/python3"); err == nil {
		return "/usr/bin/python3"
	}
	p, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3: the outside references cannot run")
	}
	return p
}

// refJob is one call of geometry_ref.py: src through op, into an image of
// shape want.
type refJob struct {
	src  *Image
	want Shape
	op   string
	args []any
	got  *Image // the reference's output, after runRefs
}

// runRefs runs every job in one interpreter and fills in their outputs.
func runRefs(t *testing.T, jobs []*refJob) {
	t.Helper()
	dir := t.TempDir()
	var manifest strings.Builder
	for i, j := range jobs {
		in, out := filepath.Join(dir, fmt.Sprint(i, ".in")), filepath.Join(dir, fmt.Sprint(i, ".out"))
		packed := NewImage(j.src.W, j.src.H, j.src.C)
		for y := range j.src.H {
			copy(packed.Row(y), j.src.Row(y))
		}
		if err := os.WriteFile(in, packed.Pix, 0o600); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&manifest, "%s %s %s %d %d %d", j.op, in, out, j.src.W, j.src.H, j.src.C)
		for _, a := range j.args {
			fmt.Fprintf(&manifest, " %v", a)
		}
		manifest.WriteByte('\n')
	}
	mf := filepath.Join(dir, "manifest")
	if err := os.WriteFile(mf, []byte(manifest.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	msg, err := exec.Command(refPython(t), "testdata/geometry_ref.py", mf).CombinedOutput()
	var ee *exec.ExitError
	if errors.As(err, &ee) && ee.ExitCode() == 3 {
		t.Skipf("outside reference unavailable: %s", msg)
	}
	if err != nil {
		t.Fatalf("geometry_ref.py: %v\n%s", err, msg)
	}
	for i, j := range jobs {
		pix, err := os.ReadFile(filepath.Join(dir, fmt.Sprint(i, ".out")))
		if err != nil {
			t.Fatal(err)
		}
		if len(pix) != j.want.Bytes() {
			t.Fatalf("%s gave %d bytes, want %s = %d", j.op, len(pix), j.want, j.want.Bytes())
		}
		j.got = &Image{W: j.want.W, H: j.want.H, C: j.want.C, Stride: j.want.W * j.want.C, Pix: pix}
	}
}

// diffCount counts the samples of a and b that differ, and the largest
// difference.
func diffCount(a, b *Image) (n, maxd int) {
	for y := range a.H {
		ra, rb := a.Row(y), b.Row(y)
		for i := range ra {
			d := int(ra[i]) - int(rb[i])
			if d != 0 {
				n++
				maxd = max(maxd, d, -d)
			}
		}
	}
	return n, maxd
}

// TestResizeAgainstReferences compares every filter with its outside
// reference over random and smooth images of odd sizes, shrinking and
// enlarging, C = 1 and 3, and logs the share of samples that differ and the
// largest difference (the figures in docs/geometry.md come from here, -v).
func TestResizeAgainstReferences(t *testing.T) {
	type size struct{ w, h, ow, oh int }
	shrink := []size{{97, 61, 31, 23}, {640, 427, 256, 171}, {301, 199, 150, 99}, {123, 77, 41, 40}, {1001, 13, 77, 5}}
	enlarge := []size{{31, 23, 97, 61}, {17, 9, 64, 40}, {50, 37, 101, 75}}
	cases := []struct {
		filter Filter
		op     string
		sizes  []size
		tol    int
	}{
		{FilterArea, "cv_area", shrink, 1},
		{FilterLinear, "cv_linear", append(append([]size{}, shrink...), enlarge...), 1},
		{FilterLanczos3, "pil_lanczos", append(append([]size{}, shrink...), enlarge...), 2},
	}
	type result struct {
		filter    Filter
		kind      string
		got       *Image
		job       *refJob
		tol       int
		src, dims string
	}
	rng := rand.New(rand.NewSource(12))
	var jobs []*refJob
	var results []result
	for _, tc := range cases {
		for _, kind := range []string{"random", "smooth"} {
			for _, sz := range tc.sizes {
				for _, c := range []int{1, 3} {
					src := randImage(rng, sz.w, sz.h, c, 3)
					if kind == "smooth" {
						src = smoothImage(rng, sz.w, sz.h, c, 3)
					}
					spec := ResizeSpec{Width: sz.ow, Height: sz.oh, Fit: FitExact, Filter: tc.filter}
					got := NewImage(sz.ow, sz.oh, c)
					Resize(got, src, spec)
					j := &refJob{src: src, want: got.Shape(), op: tc.op, args: []any{sz.ow, sz.oh}}
					jobs = append(jobs, j)
					results = append(results, result{tc.filter, kind, got, j, tc.tol, src.Shape().String(), fmt.Sprintf("%dx%d", sz.ow, sz.oh)})
				}
			}
		}
	}
	runRefs(t, jobs)
	type key struct {
		f    Filter
		kind string
	}
	type agg struct{ samples, differ, worst int }
	sums := map[key]*agg{}
	var order []key
	for _, r := range results {
		n, d := diffCount(r.got, r.job.got)
		k := key{r.filter, r.kind}
		if sums[k] == nil {
			sums[k] = &agg{}
			order = append(order, k)
		}
		a := sums[k]
		a.samples += r.got.Len()
		a.differ += n
		a.worst = max(a.worst, d)
		if d > r.tol {
			t.Errorf("%s %s %s -> %s: differs from %s by up to %d (tolerance %d) in %d of %d samples",
				r.filter, r.kind, r.src, r.dims, r.job.op, d, r.tol, n, r.got.Len())
		}
	}
	for _, k := range order {
		a := sums[k]
		t.Logf("%-8s %-6s: %6.2f%% of %d samples differ from the reference, max difference %d",
			k.f, k.kind, 100*float64(a.differ)/float64(a.samples), a.samples, a.worst)
	}
}

// TestFlipRotateCropAgainstNumpy checks the exact stages against numpy's
// fliplr/flipud, rot90 (clockwise) and slicing.
func TestFlipRotateCropAgainstNumpy(t *testing.T) {
	rng := rand.New(rand.NewSource(13))
	var jobs []*refJob
	var gots []*Image
	add := func(got *Image, src *Image, op string, args ...any) {
		jobs = append(jobs, &refJob{src: src, want: got.Shape(), op: op, args: args})
		gots = append(gots, got)
	}
	for _, c := range []int{1, 3} {
		src := randImage(rng, 37, 21, c, 5)
		for _, axis := range []Axis{FlipH, FlipV} {
			got := NewImage(src.W, src.H, c)
			Flip(got, src, axis)
			add(got, src, "np_flip", axis)
		}
		for _, angle := range []int{90, 180, 270} {
			sh := RotateShape(src.Shape(), angle)
			got := NewImage(sh.W, sh.H, c)
			Rotate(got, src, angle)
			add(got, src, "np_rotate", angle)
		}
		spec := CropSpec{X: 5, Y: 3, Width: 20, Height: 30}
		x0, y0, cw, ch := spec.Rect(src.W, src.H)
		got := NewImage(cw, ch, c)
		Crop(got, src, x0, y0)
		add(got, src, "np_crop", spec.X, spec.Y, spec.Width, spec.Height)
	}
	runRefs(t, jobs)
	for i, j := range jobs {
		t.Run(fmt.Sprint(j.op, j.args, j.src.C), func(t *testing.T) { sameImage(t, gots[i], j.got) })
	}
}
