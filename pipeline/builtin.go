package pipeline

import (
	"fmt"

	"github.com/imgpipe/imgpipe/stages"
)

// Builtin is the registry of the builtin stages. Each stage's definition is a file of its
// own (stage_<name>.go) that registers it from init; a stage that needs what the engine
// core must not import registers itself from a package of its own, which a program
// imports for that effect (the kernel stage: import _
// "github.com/imgpipe/imgpipe/pipeline/kernelstage"). Every other part of the engine and
// the CLI learns about stages from these definitions only.
var Builtin = &Registry{}

// builtin registers def in Builtin; a stage file calls it from init, and a definition
// it refuses is a bug in that file.
func builtin(def *StageDef) {
	if err := Builtin.Register(def); err != nil {
		panic("pipeline: builtin stages: " + err.Error())
	}
}

// sameShape is the ShapeFunc of a stage whose output has its input's shape.
func sameShape(in stages.Shape, _ Params) (stages.Shape, bool) { return in, false }

// Decode appends the decode stage with its default parameters (use Then for others).
func (p *Pipeline) Decode() *Pipeline { return p.Then(stageDecode, nil) }

// Grayscale appends the grayscale stage.
func (p *Pipeline) Grayscale() *Pipeline { return p.Then(stageGrayscale, nil) }

// Blur appends a Gaussian blur with the given sigma.
func (p *Pipeline) Blur(sigma float64) *Pipeline {
	return p.Then(stageBlur, Args{"sigma": sigma})
}

// BoxBlur appends a box blur with the given radius.
func (p *Pipeline) BoxBlur(radius int) *Pipeline {
	return p.Then(stageBoxBlur, Args{"radius": radius})
}

// Transpose appends the transpose stage.
func (p *Pipeline) Transpose() *Pipeline { return p.Then(stageTranspose, nil) }

// Histogram appends the histogram stage.
func (p *Pipeline) Histogram() *Pipeline { return p.Then(stageHistogram, nil) }

// Save appends the save stage with the given format ("png" or "jpeg").
func (p *Pipeline) Save(format string) *Pipeline {
	return p.Then(stageSave, Args{"format": format})
}

// Resize appends a resize to width×height with the given fit and filter.
func (p *Pipeline) Resize(width, height int, fit stages.Fit, filter stages.Filter) *Pipeline {
	return p.Then(stageResize, Args{"width": width, "height": height, "fit": string(fit), "filter": string(filter)})
}

// Crop appends a crop of width×height at (x, y).
func (p *Pipeline) Crop(x, y, width, height int) *Pipeline {
	return p.Then(stageCrop, Args{"x": x, "y": y, "width": width, "height": height})
}

// Flip appends a mirror along axis.
func (p *Pipeline) Flip(axis stages.Axis) *Pipeline {
	return p.Then(stageFlip, Args{"axis": string(axis)})
}

// Rotate appends a clockwise rotation by angle (90, 180 or 270) degrees.
func (p *Pipeline) Rotate(angle int) *Pipeline {
	return p.Then(stageRotate, Args{"angle": fmt.Sprint(angle)})
}
