package pipeline

import (
	"context"
	"image"
	"image/color"
	"io"
	"math/rand"
	"os"
	"strings"
	"testing"

	"github.com/imgpipe/imgpipe/stages"
	"github.com/imgpipe/imgpipe/stages/stagestest"
)

// ImageInput takes any standard image through a run, and the result goes back with ToImage.
func TestImageInput(t *testing.T) {
	rng := rand.New(rand.NewSource(4))
	nrgba := image.NewNRGBA(image.Rect(0, 0, 13, 7))
	rng.Read(nrgba.Pix)
	gray := image.NewGray(image.Rect(0, 0, 9, 11))
	rng.Read(gray.Pix)
	sub := nrgba.SubImage(image.Rect(3, 1, 10, 6)) // strided
	sink := Collect()
	in := Inputs(ImageInput("nrgba", nrgba), ImageInput("gray", gray), ImageInput("sub", sub),
		ImageInput("empty", image.NewRGBA(image.Rectangle{})))
	if _, err := New().Decode().Grayscale().Run(context.Background(), in, sink); err != nil {
		t.Fatal(err)
	}
	for i, src := range []image.Image{nrgba, gray, sub} {
		r := sink.Results[i]
		if r.Status != StatusOK {
			t.Fatalf("%s: %v", r.Input, r.Err)
		}
		b := src.Bounds()
		got, ok := r.Image.ToImage().(*image.Gray)
		if !ok || got.Rect != image.Rect(0, 0, b.Dx(), b.Dy()) {
			t.Fatalf("%s: ToImage gave %T %v", r.Input, r.Image.ToImage(), r.Image.ToImage().Bounds())
		}
		for y := 0; y < b.Dy(); y++ {
			for x := 0; x < b.Dx(); x++ {
				var want byte
				switch c := src.At(b.Min.X+x, b.Min.Y+y).(type) {
				case color.Gray:
					want = c.Y // grayscale is the identity on gray
				case color.NRGBA: // alpha dropped, stored colour kept
					want = byte((9798*int(c.R) + 19235*int(c.G) + 3735*int(c.B) + 16384) >> 15)
				}
				if g := got.GrayAt(x, y).Y; g != want {
					t.Fatalf("%s: (%d,%d) = %d, want %d", r.Input, x, y, g, want)
				}
			}
		}
	}
	if r := sink.Results[3]; r.Status != StatusFailed || !strings.Contains(r.Err.Error(), "0x0") {
		t.Errorf("empty image: %v %v", r.Status, r.Err)
	}
}

// tallySource counts the inputs taken from it.
type tallySource struct {
	Source
	n int
}

func (s *tallySource) Next(ctx context.Context) (Input, error) {
	s.n++
	return s.Source.Next(ctx)
}

// A chain without save into a folder is refused before any input is taken; should a run
// get past that, no input is reported ok with nothing written. Discard is the sink for such
// report-only chains.
func TestToFolderNeedsSave(t *testing.T) {
	out := t.TempDir()
	img := stagestest.ReadImage(rand.New(rand.NewSource(5)), 6, 5, 3)
	src := &tallySource{Source: Inputs(Input{Name: "a", Image: img})}
	_, err := New().Decode().Histogram().Run(context.Background(), src, ToFolder(out))
	if err == nil || !strings.Contains(err.Error(), "no save stage") || src.n != 0 {
		t.Fatalf("Pipeline.Run: err %v after %d inputs", err, src.n)
	}
	plan := compileWith(t, Builtin, "decode | histogram")
	if err := checkSink(plan, ToFolder(out)); err == nil {
		t.Error("checkSink accepts ToFolder without save")
	}
	if err := checkSink(compileWith(t, Builtin, "decode | save"), ToFolder(out)); err != nil {
		t.Error(err)
	}
	// The package-level Run: refused at once, or (until it checks the sink) every input
	// fails with the reason. Never a silent success.
	sum, err := Run(context.Background(), plan, Inputs(Input{Name: "a", Image: img}), ToFolder(out), Options{})
	if err == nil && (sum.OK != 0 || sum.Failed != 1) {
		t.Errorf("Run with ToFolder and no save: %+v", sum)
	}
	if ents, _ := os.ReadDir(out); len(ents) != 0 {
		t.Errorf("%d files written", len(ents))
	}

	// Discard: report-only, with or without save.
	for _, spec := range []string{"decode | histogram", "decode | grayscale | save format=jpeg"} {
		plan := compileWith(t, Builtin, spec)
		var got []Result
		sum, err := Run(context.Background(), plan, Inputs(Input{Name: "a.png", Image: img}), Discard(),
			Options{Report: io.Discard, Progress: func(r *Result) { got = append(got, *r) }})
		if err != nil || sum.OK != 1 {
			t.Fatalf("%s: %+v %v", spec, sum, err)
		}
		if r := got[0]; r.Image != nil || r.Output != "" || r.Width != 6 || (plan.HasHistogram() && r.Histogram == nil) {
			t.Errorf("%s: result %+v", spec, r)
		}
	}
	// An encoder error still fails the input.
	bad := &Encoder{Ext: "x", Encode: func(io.Writer, *stages.Image) error { return io.ErrShortWrite }}
	if err := Discard().Write(context.Background(), &Result{Image: img}, bad); err != io.ErrShortWrite {
		t.Errorf("Discard with a failing encoder: %v", err)
	}
}
