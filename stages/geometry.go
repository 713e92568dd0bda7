package stages

import "fmt"

// Gravity anchors a crop rectangle given by size only: which edge or corner of
// the image it keeps.
type Gravity string

// The gravities, as `crop gravity=` writes them. Northwest is the top-left
// corner, the anchor of an explicit x, y origin.
const (
	Northwest Gravity = "northwest"
	North     Gravity = "north"
	Northeast Gravity = "northeast"
	West      Gravity = "west"
	Center    Gravity = "center"
	East      Gravity = "east"
	Southwest Gravity = "southwest"
	South     Gravity = "south"
	Southeast Gravity = "southeast"
)

// Gravities lists every gravity, in the order `imgpipe stages crop` prints them.
var Gravities = []Gravity{Northwest, North, Northeast, West, Center, East, Southwest, South, Southeast}

// anchor returns where along one axis the gravity puts a span: 0 for the
// start (west, north), 1 for the middle, 2 for the end (east, south).
func (g Gravity) anchor() (ax, ay int, err error) {
	for i, v := range Gravities {
		if v == g {
			return i % 3, i / 3, nil
		}
	}
	return 0, 0, fmt.Errorf("unknown gravity %q", string(g))
}

// CropSpec is what `crop` asks for: an origin (X, Y from the top-left
// corner) or a Gravity, and a size; 0 for Width or Height means "to the
// image's edge".
type CropSpec struct {
	X, Y          int
	Width, Height int
	Gravity       Gravity // "" or Northwest: the origin is X, Y
}

// Check reports a spec that can never be applied: negative numbers or an
// unknown gravity; an origin other than 0, 0 with a gravity other than
// northwest is refused too, since the two contradict each other.
func (s CropSpec) Check() error {
	if s.X < 0 || s.Y < 0 || s.Width < 0 || s.Height < 0 {
		return fmt.Errorf("crop x=%d y=%d width=%d height=%d: no value may be negative", s.X, s.Y, s.Width, s.Height)
	}
	if s.Gravity == "" {
		return nil
	}
	if _, _, err := s.Gravity.anchor(); err != nil {
		return err
	}
	if s.Gravity != Northwest && (s.X != 0 || s.Y != 0) {
		return fmt.Errorf("crop: give either x, y or gravity=%s, not both", s.Gravity)
	}
	return nil
}

// Rect returns the rectangle the spec keeps of a w×h image, origin (x0, y0)
// and size cw×ch, always inside the image and at least 1×1:
//
//   - Width 0 means w (or w−X with an origin), larger widths are cut to the
//     image: cw = min(Width, w − x0); the same for heights.
//   - With an origin, x0 = min(X, w−1): an origin past the edge keeps the
//     last column (like numpy slicing, but never empty).
//   - With a gravity, the kept span is at the start, in the middle
//     (x0 = (w − cw) / 2, rounded down) or at the end (x0 = w − cw).
//
// It panics on a spec that fails Check (the planner checks it first).
func (s CropSpec) Rect(w, h int) (x0, y0, cw, ch int) {
	if err := s.Check(); err != nil {
		panic("stages.CropSpec.Rect: " + err.Error())
	}
	size := func(want, avail int) int {
		if want == 0 || want > avail {
			return avail
		}
		return want
	}
	if s.Gravity == "" || s.Gravity == Northwest {
		x0, y0 = min(s.X, w-1), min(s.Y, h-1)
		return x0, y0, size(s.Width, w-x0), size(s.Height, h-y0)
	}
	ax, ay, _ := s.Gravity.anchor()
	cw, ch = size(s.Width, w), size(s.Height, h)
	return ax * (w - cw) / 2, ay * (h - ch) / 2, cw, ch
}

// Crop copies the rectangle of src at (x0, y0) of dst's size into dst. It
// panics if the rectangle is not inside src.
func Crop(dst, src *Image, x0, y0 int) {
	mustValid("Crop", "src", src)
	mustValid("Crop", "dst", dst)
	if dst.C != src.C || x0 < 0 || y0 < 0 || x0+dst.W > src.W || y0+dst.H > src.H {
		panic(fmt.Sprintf("stages.Crop: %dx%dx%d at (%d,%d) is not inside %dx%dx%d",
			dst.W, dst.H, dst.C, x0, y0, src.W, src.H, src.C))
	}
	for y := range dst.H {
		copy(dst.Row(y), src.Row(y0 + y)[x0*src.C:])
	}
}

// Axis is a mirror axis: FlipH mirrors left to right, FlipV top to bottom.
type Axis string

// The flip axes, as `flip axis=` writes them.
const (
	FlipH Axis = "h"
	FlipV Axis = "v"
)

// Flip mirrors src into dst (same shape): for FlipH out(x, y) = in(W−1−x, y),
// for FlipV out(x, y) = in(x, H−1−y). It panics on another axis.
func Flip(dst, src *Image, axis Axis) {
	mustValid("Flip", "src", src)
	mustBe("Flip", "dst", dst, src.W, src.H, src.C)
	switch axis {
	case FlipV:
		for y := range src.H {
			copy(dst.Row(y), src.Row(src.H-1-y))
		}
	case FlipH:
		c := src.C
		for y := range src.H {
			in, out := src.Row(y), dst.Row(y)
			for x, o := 0, len(in)-c; x < len(out); x, o = x+c, o-c {
				copy(out[x:x+c], in[o:o+c])
			}
		}
	default:
		panic(fmt.Sprintf("stages.Flip: axis %q, want h or v", string(axis)))
	}
}

// RotateShape is the shape of an image of shape in turned clockwise by
// angle (90, 180 or 270 degrees): W and H swap for 90 and 270.
func RotateShape(in Shape, angle int) Shape {
	if angle == 90 || angle == 270 {
		return Shape{W: in.H, H: in.W, C: in.C}
	}
	return in
}

// Rotate turns src clockwise by angle degrees into dst (of RotateShape's
// shape):
//
//	 90: out(x, y) = in(y, H−1−x)
//	180: out(x, y) = in(W−1−x, H−1−y)
//	270: out(x, y) = in(W−1−y, x)
//
// where W, H are the source's. It panics on other angles.
func Rotate(dst, src *Image, angle int) {
	mustValid("Rotate", "src", src)
	out := RotateShape(src.Shape(), angle)
	mustBe("Rotate", "dst", dst, out.W, out.H, out.C)
	c := src.C
	switch angle {
	case 180:
		for y := range src.H {
			in, o := src.Row(src.H-1-y), dst.Row(y)
			for x, i := 0, len(in)-c; x < len(o); x, i = x+c, i-c {
				copy(o[x:x+c], in[i:i+c])
			}
		}
	case 90, 270:
		// Source row sy becomes destination column dx: 90 sends it to
		// column H−1−sy read top-down, 270 to column sy read bottom-up.
		for sy := range src.H {
			in := src.Row(sy)
			dx, dy0, step := src.H-1-sy, 0, 1
			if angle == 270 {
				dx, dy0, step = sy, src.W-1, -1
			}
			off := dy0*dst.Stride + dx*c
			for x := 0; x < len(in); x += c {
				copy(dst.Pix[off:off+c], in[x:x+c])
				off += step * dst.Stride
			}
		}
	default:
		panic(fmt.Sprintf("stages.Rotate: angle %d, want 90, 180 or 270", angle))
	}
}

// FlipArgs are flip's launch arguments: the mirror's axis.
type FlipArgs struct{ Axis Axis }

// LaunchStage names the stage whose GPU launcher reads these arguments (sched.LaunchArgs).
func (FlipArgs) LaunchStage() string { return "flip" }

// RotateArgs are rotate's launch arguments: the clockwise angle, 90, 180 or 270.
type RotateArgs struct{ Angle int }

// LaunchStage names the stage whose GPU launcher reads these arguments (sched.LaunchArgs).
func (RotateArgs) LaunchStage() string { return "rotate" }

// CropArgs are crop's launch arguments: the rectangle's spec, which the launcher resolves
// for each image (CropSpec.Rect).
type CropArgs struct{ Spec CropSpec }

// LaunchStage names the stage whose GPU launcher reads these arguments (sched.LaunchArgs).
func (CropArgs) LaunchStage() string { return "crop" }
