package sched

// LaunchArgs are an op's launch arguments (Op.Args): what a stage's definition binds from
// its parameters once per run, and the stage's GPU launcher reads. Each stage that takes
// any has a type of its own, named by both sides, so that the two agree at compile time
// on what travels: a builtin stage's type sits beside its CPU reference (stages.BlurArgs,
// array.ScaleArgs, ...), a user kernel's is *userkernel.Kernel. A device refuses an op
// whose arguments are not of its stage's type (Device.CheckOp).
type LaunchArgs interface {
	// LaunchStage is the registry name of the stage whose launcher reads the arguments.
	LaunchStage() string
}
