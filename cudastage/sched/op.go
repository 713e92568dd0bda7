package sched

import (
	"errors"
	"fmt"
	"strings"

	"github.com/imgpipe/imgpipe/stages"
)

// Shape is the geometry of one tightly packed 8-bit interleaved image; it is
// the stages package's, shared by every layer.
type Shape = stages.Shape

// MaxSide bounds W and H so that byte counts can never overflow an int, even
// on the way to being compared with a limit.
const MaxSide = 1 << 20

// CheckShape reports whether s is an image the executor can place (and a
// device must run): 1 or 3 channels, sides from 1 to MaxSide.
func CheckShape(s Shape) error {
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

// CPUFunc is a pixel stage's reference implementation with its parameters
// bound. dst has the op's output shape for src, or is nil for a histogram op;
// hist is non-nil only for a histogram op.
type CPUFunc func(dst, src *stages.Image, hist *[256]uint64)

// ReduceFunc is a reduction op's reference implementation with its parameters
// bound: the value of the array src (ArrayShape, its elements as the bytes of
// little-endian float32s).
type ReduceFunc func(src *stages.Image) float32

// Op is one pixel operation of a device segment: a stage of the registry
// with its parameters bound. The scheduler knows no stage by name; everything
// it needs is here. A Device finds the kernels that run the op by Name (the
// CUDA device keeps one launcher per stage name); the fake device runs CPU.
type Op struct {
	// Name is the stage's registry name ("blur").
	Name string
	// Spec is the stage as a spec writes it ("blur sigma=1.5"), for traces
	// and statistics.
	Spec string
	// Out is the output shape for an input shape; nil means the same shape.
	Out func(in Shape) Shape
	// Hist marks an op that counts 256 histogram bins per image and passes
	// the image through unchanged: it writes counts, not an image.
	Hist bool
	// CPU is the stage's reference implementation, bound. A device's kernels
	// must give its exact bits. It is nil for a GPU-only stage (a user
	// kernel), which has no reference.
	CPU CPUFunc
	// Args are the launch arguments the stage's GPU launcher reads (the blur
	// taps, say), bound once per run from the stage's parameters; nil for a
	// stage that has none.
	Args LaunchArgs
	// Encode, when set, makes the op the segment's encoder (see EncodeOp):
	// its output per image is a file, not an image.
	Encode *EncodeOp
	// Array marks an op over float32 arrays (ReserveArray) instead of
	// images: every op of a segment takes arrays, or none does. An
	// elementwise array op's CPU reads and writes ArrayShape images.
	Array bool
	// Reduce, set on an array op, makes it a reduction (an array's sum, min
	// or max): it writes one float32 per array, which comes back in
	// Result.Values, and passes the array through. It is the reduction's
	// reference implementation, whose bits a device's kernel must give; CPU
	// is then nil.
	Reduce ReduceFunc
}

// OutShape is the shape of the image the op produces from an input of shape
// in; for a histogram op, and for an encoding op (whose output is a file of
// at most Encode.Bound(in) bytes), it is in itself.
func (o Op) OutShape(in Shape) Shape {
	if o.Out == nil || o.Hist || o.Encode != nil {
		return in
	}
	return o.Out(in)
}

// makesImage reports whether the op writes a new image or array (every op
// but a histogram or a reduction, which only read).
func (o Op) makesImage() bool { return !o.Hist && o.Reduce == nil }

// String is the op as a spec writes it.
func (o Op) String() string {
	if o.Spec != "" {
		return o.Spec
	}
	return o.Name
}

// Check reports whether the op is complete: it has a name, and an encoding
// op has a complete EncodeOp and counts no histogram. Its arguments (and
// whether a missing CPU function matters: a GPU-only stage has none, and an
// encoding op's CPU is its EncodeOp) are the device's to check
// (Device.CheckOp), since only the device knows what it runs.
func (o Op) Check() error {
	switch {
	case o.Name == "":
		return errors.New("op without a name")
	case o.Encode != nil && o.Hist:
		return fmt.Errorf("op %s both encodes and counts a histogram", o.Name)
	case o.Reduce != nil && !o.Array:
		return fmt.Errorf("op %s reduces, but takes images, not arrays", o.Name)
	case o.Array && (o.Hist || o.Encode != nil):
		return fmt.Errorf("op %s takes arrays, so it neither counts a histogram nor encodes", o.Name)
	case o.Encode != nil:
		return o.Encode.check()
	}
	return nil
}

// checkOps validates a segment on dev: at least one op, each one complete and
// runnable there.
func checkOps(dev Device, ops []Op) error {
	if len(ops) == 0 {
		return errors.New("device segment has no ops")
	}
	var errs []error
	for i, op := range ops {
		err := op.Check()
		if err == nil && op.Encode != nil && i != len(ops)-1 {
			err = fmt.Errorf("%s encodes, so it must be the segment's last op", op)
		}
		if err == nil && op.Array != ops[0].Array {
			err = fmt.Errorf("%s: a segment's ops take arrays or images, not both", op)
		}
		if err == nil {
			err = dev.CheckOp(op)
		}
		if err != nil {
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
