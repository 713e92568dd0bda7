package sched

import "github.com/imgpipe/imgpipe/stages"

// LaunchArgs are an op's launch arguments (Op.Args): what a stage's definition binds from
// its parameters once per run, and the stage's GPU launcher reads. Each stage that takes
// any has a type of its own, named by both sides, so that the two agree at compile time
// on what travels: the builtin stages' types are below, a user kernel's is
// *userkernel.Kernel. A device refuses an op whose arguments are not of its stage's type
// (Device.CheckOp).
type LaunchArgs interface {
	// LaunchStage is the registry name of the stage whose launcher reads the arguments.
	LaunchStage() string
}

// BlurArgs are blur's launch arguments: the integer taps of stages.BlurTaps (2r+1 of
// them), so that the device gets exactly the CPU's integers.
type BlurArgs struct{ Taps []uint32 }

// BoxBlurArgs are boxblur's launch arguments: the window's radius.
type BoxBlurArgs struct{ Radius int }

// FlipArgs are flip's launch arguments: the mirror's axis.
type FlipArgs struct{ Axis stages.Axis }

// RotateArgs are rotate's launch arguments: the clockwise angle, 90, 180 or 270.
type RotateArgs struct{ Angle int }

// CropArgs are crop's launch arguments: the rectangle's spec, which the launcher resolves
// for each image (stages.CropSpec.Rect).
type CropArgs struct{ Spec stages.CropSpec }

// ResizeArgs are resize's launch arguments: the spec, which the launcher resolves for each
// image (stages.ResizeSpec.Axes).
type ResizeArgs struct{ Spec stages.ResizeSpec }

// ScaleArgs are the scale array stage's launch arguments: the factor, rounded to float32
// once, as the CPU implementation rounds it.
type ScaleArgs struct{ Factor float32 }

// AddArgs are the add array stage's launch arguments: the addend, rounded to float32 once.
type AddArgs struct{ Value float32 }

// LaunchStage implements LaunchArgs.
func (BlurArgs) LaunchStage() string { return "blur" }

// LaunchStage implements LaunchArgs.
func (BoxBlurArgs) LaunchStage() string { return "boxblur" }

// LaunchStage implements LaunchArgs.
func (FlipArgs) LaunchStage() string { return "flip" }

// LaunchStage implements LaunchArgs.
func (RotateArgs) LaunchStage() string { return "rotate" }

// LaunchStage implements LaunchArgs.
func (CropArgs) LaunchStage() string { return "crop" }

// LaunchStage implements LaunchArgs.
func (ResizeArgs) LaunchStage() string { return "resize" }

// LaunchStage implements LaunchArgs.
func (ScaleArgs) LaunchStage() string { return "scale" }

// LaunchStage implements LaunchArgs.
func (AddArgs) LaunchStage() string { return "add" }
