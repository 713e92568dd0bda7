package sched

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/imgpipe/imgpipe/stages"
)

// Shape is the geometry of one tightly packed 8-bit interleaved image.
type Shape struct {
	W, H int // width and height in pixels
	C    int // channels: 1 (gray) or 3 (RGB)
}

// Bytes is W·H·C, the size of the image packed without row padding.
func (s Shape) Bytes() int { return s.W * s.H * s.C }

// MaxSide bounds W and H so that byte counts can never overflow an int, even
// on the way to being compared with a limit.
const MaxSide = 1 << 20

func (s Shape) check() error {
	switch {
	case s.C != 1 && s.C != 3:
		return fmt.Errorf("image has %d channels, want 1 or 3", s.C)
	case s.W < 1 || s.H < 1:
		return fmt.Errorf("image is %dx%d, want at least 1x1", s.W, s.H)
	case s.W > MaxSide || s.H > MaxSide:
		return fmt.Errorf("image is %dx%d, sides are limited to %d", s.W, s.H, MaxSide)
	}
	return nil
}

// OpKind names a device pixel operation.
type OpKind uint8

// The pixel operations a device segment can hold. Their exact semantics are
// those of the matching functions in package stages.
const (
	OpGrayscale OpKind = iota + 1 // RGB → Y (C=1 passes through)
	OpBlur                        // separable integer Gaussian with Op.Taps
	OpBoxBlur                     // (2r+1)² mean with Op.Radius
	OpTranspose                   // W and H swap
	OpHistogram                   // 256 counts per image; the image passes through
)

func (k OpKind) String() string {
	switch k {
	case OpGrayscale:
		return "grayscale"
	case OpBlur:
		return "blur"
	case OpBoxBlur:
		return "boxblur"
	case OpTranspose:
		return "transpose"
	case OpHistogram:
		return "histogram"
	}
	return "op(" + strconv.Itoa(int(k)) + ")"
}

// Op is one pixel operation of a device segment, with its parameters already
// validated. Build it with the constructors (GrayscaleOp, BlurOp, ...), which
// reject bad parameters, rather than by hand.
type Op struct {
	Kind   OpKind
	Sigma  float64  // OpBlur: the sigma the taps were made from (for names only)
	Taps   []uint32 // OpBlur: the 2r+1 integer taps of stages.BlurTaps
	Radius int      // OpBoxBlur: 0..MaxBoxRadius
}

// Limits of the operations' parameters, as in DESIGN.md and package stages.
const (
	MaxSigma     = stages.MaxBlurSigma
	MaxBoxRadius = stages.MaxBoxRadius
	// MaxBlurTaps is the longest blur kernel: stages.BlurTaps(MaxSigma)
	// reaches 3σ either side of the centre.
	MaxBlurTaps = 2*3*MaxSigma + 1
)

// GrayscaleOp converts RGB to luma; gray input passes through.
func GrayscaleOp() Op { return Op{Kind: OpGrayscale} }

// TransposeOp swaps rows and columns.
func TransposeOp() Op { return Op{Kind: OpTranspose} }

// HistogramOp counts the 256 values (C=1) or lumas (C=3) of each image; the
// pixels pass through unchanged.
func HistogramOp() Op { return Op{Kind: OpHistogram} }

// BlurOp is a Gaussian blur with 0 < sigma ≤ MaxSigma. Its taps come from
// stages.BlurTaps so that the device receives exactly the CPU's integers.
func BlurOp(sigma float64) (Op, error) {
	if !(sigma > 0 && sigma <= MaxSigma) || math.IsNaN(sigma) {
		return Op{}, fmt.Errorf("blur: sigma %v out of range (0, %d]", sigma, MaxSigma)
	}
	op := Op{Kind: OpBlur, Sigma: sigma, Taps: stages.BlurTaps(sigma)}
	if err := op.Check(); err != nil {
		return Op{}, err
	}
	return op, nil
}

// BoxBlurOp is the (2r+1)² mean with 0 ≤ r ≤ MaxBoxRadius.
func BoxBlurOp(radius int) (Op, error) {
	op := Op{Kind: OpBoxBlur, Radius: radius}
	if err := op.Check(); err != nil {
		return Op{}, err
	}
	return op, nil
}

// Check reports whether the op's parameters are valid: blur taps as
// stages.BlurTaps makes them (odd count from 3 to MaxBlurTaps, symmetric,
// summing to 16384, which keeps every intermediate in range), a boxblur
// radius within 0..MaxBoxRadius. The constructors only return ops that pass;
// the device checks again because an Op is a plain struct anyone can fill.
func (o Op) Check() error {
	switch o.Kind {
	case OpGrayscale, OpTranspose, OpHistogram:
		return nil
	case OpBlur:
		// The taps must be odd in number and sum to 16384, or the integer
		// arithmetic of DESIGN.md would not hold on the device either (and
		// stages.Blur, the fake device's kernel, would panic).
		if len(o.Taps) < 3 || len(o.Taps)%2 == 0 || len(o.Taps) > MaxBlurTaps {
			return fmt.Errorf("blur: %d taps, want an odd count from 3 to %d", len(o.Taps), MaxBlurTaps)
		}
		var sum uint64
		for i, t := range o.Taps {
			if t != o.Taps[len(o.Taps)-1-i] {
				return errors.New("blur: taps are not symmetric")
			}
			sum += uint64(t)
		}
		if sum != 16384 {
			return fmt.Errorf("blur: taps sum to %d, want 16384", sum)
		}
		return nil
	case OpBoxBlur:
		if o.Radius < 0 || o.Radius > MaxBoxRadius {
			return fmt.Errorf("boxblur: radius %d out of range [0, %d]", o.Radius, MaxBoxRadius)
		}
		return nil
	}
	return fmt.Errorf("unknown op kind %d", o.Kind)
}

// OutShape is the shape of the image the op produces from an input of shape
// in. For OpHistogram it is in itself: the image passes through.
func (o Op) OutShape(in Shape) Shape {
	switch o.Kind {
	case OpGrayscale:
		return Shape{W: in.W, H: in.H, C: 1}
	case OpTranspose:
		return Shape{W: in.H, H: in.W, C: in.C}
	}
	return in
}

// makesImage reports whether the op writes a new image (every op but the
// histogram, which only reads).
func (o Op) makesImage() bool { return o.Kind != OpHistogram }

// String is the op as a pipeline spec would write it, e.g. "blur sigma=1.5".
func (o Op) String() string {
	switch o.Kind {
	case OpBlur:
		return "blur sigma=" + strconv.FormatFloat(o.Sigma, 'g', -1, 64)
	case OpBoxBlur:
		return "boxblur radius=" + strconv.Itoa(o.Radius)
	}
	return o.Kind.String()
}

// checkOps validates a segment: at least one op, each one valid.
func checkOps(ops []Op) error {
	if len(ops) == 0 {
		return errors.New("device segment has no ops")
	}
	var errs []error
	for i, op := range ops {
		if err := op.Check(); err != nil {
			errs = append(errs, fmt.Errorf("op %d: %w", i+1, err))
		}
	}
	return errors.Join(errs...)
}

// SegmentString writes ops as a spec fragment: "grayscale | blur sigma=1.5".
func SegmentString(ops []Op) string {
	parts := make([]string, len(ops))
	for i, op := range ops {
		parts[i] = op.String()
	}
	return strings.Join(parts, " | ")
}
