package sched

import (
	"fmt"
	"strconv"
	"testing"

	"github.com/imgpipe/imgpipe/stages"
)

// The builtin pixel stages as package pipeline binds them (pipeline.bindOp), rebuilt here
// from package stages for the executor's tests: sched cannot import pipeline. They are
// exported for the tests of package sched_test, which use the fake device of package
// schedtest (an internal test cannot import it: it imports sched).

func GrayscaleOp() Op {
	return Op{Name: "grayscale", Spec: "grayscale",
		Out: func(in Shape) Shape { return Shape{W: in.W, H: in.H, C: 1} },
		CPU: func(dst, src *stages.Image, _ *[256]uint64) { stages.Grayscale(dst, src) }}
}

func TransposeOp() Op {
	return Op{Name: "transpose", Spec: "transpose",
		Out: func(in Shape) Shape { return Shape{W: in.H, H: in.W, C: in.C} },
		CPU: func(dst, src *stages.Image, _ *[256]uint64) { stages.Transpose(dst, src) }}
}

func HistogramOp() Op {
	return Op{Name: "histogram", Spec: "histogram", Hist: true,
		CPU: func(_, src *stages.Image, h *[256]uint64) { stages.Histogram(h, src) }}
}

func BlurOp(sigma float64) (Op, error) {
	if !(sigma > 0 && sigma <= stages.MaxBlurSigma) {
		return Op{}, fmt.Errorf("blur: sigma %v out of range", sigma)
	}
	taps := stages.BlurTaps(sigma)
	return Op{Name: "blur", Spec: "blur sigma=" + strconv.FormatFloat(sigma, 'g', -1, 64), Args: stages.BlurArgs{Taps: taps},
		CPU: func(dst, src *stages.Image, _ *[256]uint64) { stages.Blur(dst, src, taps) }}, nil
}

func BoxBlurOp(r int) (Op, error) {
	if r < 0 || r > stages.MaxBoxRadius {
		return Op{}, fmt.Errorf("boxblur: radius %d out of range", r)
	}
	return Op{Name: "boxblur", Spec: "boxblur radius=" + strconv.Itoa(r), Args: stages.BoxBlurArgs{Radius: r},
		CPU: func(dst, src *stages.Image, _ *[256]uint64) { stages.BoxBlur(dst, src, r) }}, nil
}

// MustBlurOp is BlurOp, failing t on an error.
func MustBlurOp(t testing.TB, sigma float64) Op {
	t.Helper()
	op, err := BlurOp(sigma)
	if err != nil {
		t.Fatal(err)
	}
	return op
}

// MustBoxBlurOp is BoxBlurOp, failing t on an error.
func MustBoxBlurOp(t testing.TB, r int) Op {
	t.Helper()
	op, err := BoxBlurOp(r)
	if err != nil {
		t.Fatal(err)
	}
	return op
}

// PNGOp is an encoding last op that writes each image as a PNG (Huffman only, as save
// compression=fast does today) into at most bound(in) bytes.
func PNGOp(bound func(Shape) int) Op {
	return Op{Name: "save", Spec: "save format=png", Encode: &EncodeOp{Format: "png-test", Bound: bound,
		CPU: func(dst []byte, src *stages.Image) int {
			w := &fixedWriter{b: dst[:0]}
			if err := stages.Encode(w, src, stages.SaveOptions{Format: "png", Compression: stages.PNGFast}); err != nil {
				return -1
			}
			return len(w.b)
		}}}
}

// PNGBound is a bound no PNG of PNGOp exceeds: the filtered rows stored, with room for
// the headers.
func PNGBound(in Shape) int { return 2*in.H*(in.W*in.C+1) + 4096 }

// fixedWriter appends into its slice's capacity and fails past it.
type fixedWriter struct{ b []byte }

func (w *fixedWriter) Write(p []byte) (int, error) {
	if len(w.b)+len(p) > cap(w.b) {
		return 0, fmt.Errorf("%d bytes over a bound of %d", len(w.b)+len(p), cap(w.b))
	}
	w.b = append(w.b, p...)
	return len(p), nil
}
