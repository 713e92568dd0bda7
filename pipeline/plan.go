package pipeline

import (
	"fmt"
	"strings"

	"github.com/imgpipe/imgpipe/cudastage/sched"
	"github.com/imgpipe/imgpipe/stages"
)

// Plan is a checked chain, bound to its implementations and ready to run:
//
//	Decode -> Pixels[0] -> ... -> Pixels[n-1] -> Save (optional)
//
// Decode and Save are host steps (files in, files out). Pixels is the run of image-to-image
// stages between them; on a GPU it becomes one or more device segments, split wherever a
// stage has no GPU implementation, with an upload at each segment's entry and a download at
// its exit. Each PixelStep keeps its definition, so that split reads the registry only.
type Plan struct {
	// Steps is the whole chain as given.
	Steps []Step
	// Decode turns inputs into pixels; Steps[0] is its step.
	Decode *Decoder
	// Pixels are the image-to-image stages, in order.
	Pixels []PixelStep
	// Save encodes the final image; nil when the chain has no sink (the report is then the
	// only output).
	Save *SaveStep
	// Load, instead of Decode, reads float32 arrays for the Arrays stages (see array.go).
	Load *Loader
	// Arrays are the array stages of a chain that starts with Load, in order.
	Arrays []ArrayStep
}

// PixelStep is a pixel stage of a plan with its implementations bound.
type PixelStep struct {
	Step
	// Run is the bound CPU implementation; nil for a GPU-only stage.
	Run CPUFunc
	// GPU is the bound device op, or nil when the stage has no GPU implementation.
	GPU *sched.Op
}

// SaveStep is the sink stage of a plan with its encoder bound.
type SaveStep struct {
	Step
	*Encoder
}

// Compile checks steps against the builtin registry's rules and binds them; see
// Registry.Compile.
func Compile(steps []Step) (*Plan, error) { return Builtin.Compile(steps) }

// Compile checks a chain before anything runs and binds each stage's parameters to its
// implementation. The rules: a chain starts with a source stage (decode), ends with at
// most one sink (save), holds pixel stages in between and at most one stage that attaches
// a histogram; every parameter is valid for its stage. Every problem is reported, each with
// the position of the stage at fault. A step with Err (one that failed to parse) adds its
// own problems and is checked for its place in the chain only.
func (r *Registry) Compile(steps []Step) (*Plan, error) {
	if len(steps) == 0 {
		return nil, fmt.Errorf("empty chain: it must start with %s", r.kindNames(SourceKind))
	}
	if len(steps) > MaxSteps {
		return nil, fmt.Errorf("chain has %d stages, over the limit of %d", len(steps), MaxSteps)
	}
	var errs []error
	fail := func(s Step, format string, args ...any) {
		errs = append(errs, &PosError{Pos: s.Pos, Err: fmt.Errorf(format, args...)})
	}
	// bound reports a binding's error under the stage's name, once.
	bound := func(s Step, err error) bool {
		if err != nil {
			fail(s, "%s", stageError(s.Def.Name, err))
		}
		return err == nil
	}
	plan := &Plan{Steps: make([]Step, len(steps))}
	var hist *Step
	arrays, reductions := isArrayChain(steps), map[string]bool{}
	// Order is judged among the stages that have a name: an unknown one (already reported)
	// may be the source the user meant, and a trailing '|' is not a stage after save.
	first, last := -1, -1
	for i, s := range steps {
		if s.Def != nil {
			last = i
			if first < 0 {
				first = i
			}
		}
	}
	for i, s := range steps {
		errs = append(errs, Errors(s.Err)...)
		if s.Def == nil {
			if s.Err == nil {
				errs = append(errs, fmt.Errorf("stage %d has no definition", i+1))
			}
			continue
		}
		if d, ok := r.Lookup(s.Def.Name); !ok || d != s.Def {
			fail(s, "stage %s is not in this registry", s.Def.Name)
			continue
		}
		parsed := s.Err == nil // only a parsed stage is bound
		if parsed {
			if s.Params.def == nil && s.Params.vals == nil {
				s.Params = defaults(s.Def) // a hand-built Step{Def: d} means "all defaults"
			}
			if err := s.Params.check(s.Def); err != nil {
				fail(s, "%v", err)
				continue
			}
		}
		plan.Steps[i] = s
		if s.Def.Kind != SourceKind && i == 0 {
			fail(s, "the chain must start with %s, not %s", r.kindNames(SourceKind), s.Def.Name)
		}
		switch s.Def.Kind {
		case SourceKind:
			if i != first {
				fail(s, "%s must be the first stage, not stage %d", s.Def.Name, i+1)
				continue
			}
			if !parsed {
				continue
			}
			if arrays {
				ld, err := s.Def.NewLoader(s.Params)
				if bound(s, err) {
					plan.Load = ld
				}
				continue
			}
			dec, err := s.Def.NewDecoder(s.Params)
			if bound(s, err) {
				plan.Decode = dec
			}
		case ArrayKind:
			// A stage that failed is still checked for the data it takes (an array stage
			// in an image chain), which needs no binding.
			if i != 0 && (parsed || !arrays) {
				if err := compileArrayStep(plan, s, arrays, reductions); err != nil {
					fail(s, "%v", err)
				}
			}
		case PixelKind:
			if arrays {
				if parsed || s.Def.ArrayGPU == nil {
					if err := compileArrayStep(plan, s, arrays, reductions); err != nil {
						fail(s, "%v", err)
					}
				}
				continue
			}
			if s.Def.Histogram {
				if hist != nil {
					fail(s, "a chain holds at most one histogram stage (the report has one histogram per input); %s is already at %s", hist.Def.Name, hist.Pos)
					continue
				}
				hist = &plan.Steps[i]
			}
			if !parsed {
				continue
			}
			run, err := bindCPU(s)
			if !bound(s, err) {
				continue
			}
			ps := PixelStep{Step: s, Run: run}
			if s.Def.GPU != nil {
				op, err := bindOp(s, run)
				if !bound(s, err) {
					continue
				}
				ps.GPU = &op
			}
			plan.Pixels = append(plan.Pixels, ps)
		case SinkKind:
			if i != last {
				fail(s, "%s must be the last stage", s.Def.Name)
				continue
			}
			if !parsed {
				continue
			}
			enc, err := s.Def.NewEncoder(s.Params)
			if !bound(s, err) {
				continue
			}
			if arrays && enc.EncodeArray == nil {
				fail(s, "%s format=%s cannot write float32 arrays: use format=npy", s.Def.Name, enc.Options.Format)
				continue
			}
			plan.Save = &SaveStep{Step: s, Encoder: enc}
		}
	}
	if err := bindDecodeScale(plan, steps); err != nil {
		errs = append(errs, err)
	}
	inOrder(errs)
	if err := joinErrors(errs); err != nil {
		return nil, err
	}
	return plan, nil
}

// stageError is err from binding the stage called name, prefixed with that name unless its
// message already starts with it ("resize: give width, height or both").
func stageError(name string, err error) string {
	if msg := err.Error(); strings.HasPrefix(msg, name) {
		return msg
	}
	return name + ": " + err.Error()
}

// bindDecodeScale is THE coupling of decode scale=auto with the resize right after it: the
// decoder's scale becomes stages.AutoDCTScale of that resize, per image. Without a resize
// there the default leaves the decoder at full size, and a scale=auto written out is an
// error at decode's position: there is nothing to take a size from.
func bindDecodeScale(plan *Plan, steps []Step) error {
	if plan.Decode == nil || !plan.Decode.AutoScale {
		return nil
	}
	next := Step{}
	if len(steps) > 1 {
		next = steps[1]
	}
	switch {
	case next.Def == nil && next.Err != nil:
		return nil // an unknown stage, already reported: perhaps the resize
	case (next.Def == nil || next.Def.Name != stageResize) && !steps[0].Params.Given("scale"):
		return nil
	case next.Def == nil || next.Def.Name != stageResize:
		return errorAt(steps[0].Pos, "%s scale=%s needs a %s right after it", steps[0].Def.Name, scaleAuto, stageResize)
	case next.Err != nil:
		return nil
	}
	spec := resizeSpec(next.Params)
	plan.Decode.Scale = func(w, h int) int { return stages.AutoDCTScale(spec, w, h) }
	return nil
}

// check validates every value against its definition: Params made by this package always
// pass, hand-assembled ones might not.
func (p Params) check(d *StageDef) error {
	if p.def != d {
		return fmt.Errorf("parameters of %s given to %s", p.def.Name, d.Name)
	}
	var errs []error
	for i := range d.Params {
		ps := &d.Params[i]
		v, ok := p.vals[ps.Name]
		if !ok {
			errs = append(errs, fmt.Errorf("%s: parameter %s missing", d.Name, ps.Name))
			continue
		}
		if err := ps.validate(v); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", d.Name, err))
		}
	}
	return joinErrors(errs)
}

// kindNames lists the stages of a kind, for messages: "decode" or "decode or raw".
func (r *Registry) kindNames(k Kind) string {
	var names []string
	for _, d := range r.Stages() {
		if d.Kind == k {
			names = append(names, d.Name)
		}
	}
	if len(names) == 0 {
		return "a " + k.String() + " stage"
	}
	return strings.Join(names, " or ")
}

// String returns the plan's canonical spec.
func (p *Plan) String() string { return FormatSpec(p.Steps) }

// HasHistogram reports whether the chain attaches a histogram to each item.
func (p *Plan) HasHistogram() bool {
	for _, ps := range p.Pixels {
		if ps.Def.Histogram {
			return true
		}
	}
	return false
}

// ReportOnly reports whether the chain saves nothing but puts values in the report: a
// histogram, or an array stage's reduction (sum, min, max). Its report is its output.
func (p *Plan) ReportOnly() bool {
	if p.Save != nil {
		return false
	}
	for _, s := range p.Steps {
		if s.Def.Histogram || s.Def.Reduces {
			return true
		}
	}
	return false
}

// bindOp binds a pixel step with a GPU kernel into the scheduler's op: its name, canonical
// text, output shape, histogram flag, bound CPU function and launch arguments. Everything
// the device layers know of a stage comes from here.
//
// A device gives every op that makes an image an output buffer, also for inputs the stage
// passes through (grayscale on gray): the op's CPU function then copies the input, which is
// what the stage's kernel must do too, so that the device path gives the CPU path's bits.
func bindOp(s Step, run CPUFunc) (sched.Op, error) {
	args, err := s.Def.GPU(s.Params)
	if err != nil {
		return sched.Op{}, err
	}
	def, params := s.Def, s.Params
	var cpu CPUFunc // a GPU-only stage's op has none
	if run != nil {
		cpu = func(dst, src *stages.Image, hist *[256]uint64) {
			if _, pass := def.Shape(src.Shape(), params); pass && dst != nil {
				for y := range src.H {
					copy(dst.Row(y), src.Row(y))
				}
				return
			}
			run(dst, src, hist)
		}
	}
	return sched.Op{
		Name: def.Name,
		Spec: opSpec(s),
		Out: func(in stages.Shape) stages.Shape {
			out, _ := def.Shape(in, params)
			return out
		},
		Hist: def.Histogram,
		CPU:  cpu,
		Args: args,
	}, nil
}

// opSpec is a step as a spec writes it with every parameter, for an op's traces.
func opSpec(s Step) string {
	spec := s.Def.Name
	for i := range s.Def.Params {
		ps := &s.Def.Params[i]
		spec += " " + ps.Name + "=" + ps.format(s.Params.get(ps.Name))
	}
	return spec
}

// bindCPU binds a pixel step's CPU implementation; a GPU-only stage has none (nil).
func bindCPU(s Step) (CPUFunc, error) {
	if s.Def.CPU == nil {
		return nil, nil
	}
	return s.Def.CPU(s.Params)
}

// CheckCPU reports whether the plan can run on the CPU: every pixel or array stage has a
// CPU implementation. The error names the first GPU-only stage, its position and why.
func (p *Plan) CheckCPU() error {
	gpuOnly := func(s Step) error {
		return &PosError{Pos: s.Pos, Err: fmt.Errorf("stage %s runs only on a GPU (%s): run it with --device cuda", s.Def.Name, s.Def.GPUOnly)}
	}
	for _, ps := range p.Pixels {
		if ps.Run == nil {
			return gpuOnly(ps.Step)
		}
	}
	for _, as := range p.Arrays {
		if as.Run == nil {
			return gpuOnly(as.Step)
		}
	}
	return nil
}

// OutShape is the shape of the final image for a decoded image of shape in.
func (p *Plan) OutShape(in stages.Shape) stages.Shape {
	for _, ps := range p.Pixels {
		in, _ = ps.Def.Shape(in, ps.Params)
	}
	return in
}

// Check walks an image of shape in through the plan's pixel stages before it is decoded:
// it returns the most pixels an image along the chain has (in's included), or the first
// stage's refusal of its input shape (StageDef.Limit) as a *StageError.
func (p *Plan) Check(in stages.Shape) (maxPixels int64, err error) {
	maxPixels = int64(in.W) * int64(in.H)
	for _, ps := range p.Pixels {
		if ps.Def.Limit != nil {
			if err := ps.Def.Limit(in, ps.Params); err != nil {
				return 0, &StageError{Stage: ps.Def.Name, Err: err}
			}
		}
		in, _ = ps.Def.Shape(in, ps.Params)
		maxPixels = max(maxPixels, int64(in.W)*int64(in.H))
	}
	return maxPixels, nil
}

// DeviceOps returns the plan's pixel stages (for an array chain, its array stages) as one
// device segment's ops, for an executor that runs the whole chain on the GPU. It fails
// when the plan has no such stage (there is nothing for a device to do) or when a stage
// has no GPU implementation, naming the first such stage.
func (p *Plan) DeviceOps() ([]sched.Op, error) {
	if p.Load != nil {
		return p.arrayDeviceOps()
	}
	if len(p.Pixels) == 0 {
		return nil, fmt.Errorf("chain %q has no pixel stage to run on a device", p.String())
	}
	ops := make([]sched.Op, 0, len(p.Pixels))
	for _, ps := range p.Pixels {
		if ps.GPU == nil {
			return nil, &PosError{Pos: ps.Pos, Err: fmt.Errorf("stage %s has no GPU implementation", ps.Def.Name)}
		}
		ops = append(ops, *ps.GPU)
	}
	return ops, nil
}

// DeviceOps turns a chain of pixel stages only (as ParseSpec gives for
// "grayscale | blur sigma=1.5 | transpose | histogram") into device ops, for callers that
// feed pixels to an executor themselves (benchmarks). Every step must be a pixel stage
// with a GPU implementation; every problem is reported with its position.
func DeviceOps(steps []Step) ([]sched.Op, error) {
	if len(steps) == 0 {
		return nil, fmt.Errorf("empty chain: give at least one pixel stage")
	}
	var (
		ops  []sched.Op
		errs []error
		hist *Step
	)
	for i, s := range steps {
		switch {
		case s.Def == nil:
			errs = append(errs, fmt.Errorf("stage %d has no definition", i+1))
			continue
		case s.Def.Kind != PixelKind:
			errs = append(errs, errorAt(s.Pos, "%s is a %s stage; a device chain holds pixel stages only", s.Def.Name, s.Def.Kind))
			continue
		case s.Def.GPU == nil:
			errs = append(errs, errorAt(s.Pos, "stage %s has no GPU implementation", s.Def.Name))
			continue
		}
		if s.Def.Histogram {
			if hist != nil {
				errs = append(errs, errorAt(s.Pos, "a chain holds at most one histogram stage; %s is already at %s", hist.Def.Name, hist.Pos))
				continue
			}
			hist = &steps[i]
		}
		if s.Params.def == nil && s.Params.vals == nil {
			s.Params = defaults(s.Def)
		}
		if err := s.Params.check(s.Def); err != nil {
			errs = append(errs, errorAt(s.Pos, "%v", err))
			continue
		}
		run, err := bindCPU(s)
		if err == nil {
			var op sched.Op
			if op, err = bindOp(s, run); err == nil {
				ops = append(ops, op)
			}
		}
		if err != nil {
			errs = append(errs, errorAt(s.Pos, "%s: %v", s.Def.Name, err))
		}
	}
	if err := joinErrors(errs); err != nil {
		return nil, err
	}
	return ops, nil
}
