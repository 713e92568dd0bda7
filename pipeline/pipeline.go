package pipeline

import (
	"context"
	"fmt"
)

// Args are a stage's parameters in the Go API: Go values (int, float64, bool, string) by
// parameter name.
type Args map[string]any

// Pipeline is a chain of stages built in Go, with the options to run it. Build one with
// New and the typed methods (Decode, Grayscale, Blur, ...) or Then, or with Parse. Builder
// methods record errors instead of returning them, so chains read fluently; Plan and Run
// report them all.
type Pipeline struct {
	reg   *Registry
	steps []Step
	errs  []error
	opt   Options
}

// New starts an empty pipeline over the builtin stages.
func New() *Pipeline { return Builtin.New() }

// New starts an empty pipeline over r's stages.
func (r *Registry) New() *Pipeline { return &Pipeline{reg: r} }

// Parse builds a pipeline over the builtin stages from a spec such as
// "decode | grayscale | blur sigma=1.5"; it is Builtin.Parse.
func Parse(spec string) (*Pipeline, error) { return Builtin.Parse(spec) }

// Parse builds a pipeline over r's stages from a spec, so that a spec can name stages
// registered in r besides the builtin ones (see NewRegistry). Errors are ParseSpec's: every
// problem, each with its column. Then and the typed methods can extend the result.
func (r *Registry) Parse(spec string) (*Pipeline, error) {
	steps, err := r.ParseSpec(spec)
	if err != nil {
		return nil, err
	}
	return &Pipeline{reg: r, steps: steps}, nil
}

// Then appends the stage called name with args (nil for the defaults).
func (p *Pipeline) Then(name string, args Args) *Pipeline {
	n := len(p.steps) + len(p.errs) + 1
	def, ok := p.reg.Lookup(name)
	if !ok {
		p.errs = append(p.errs, fmt.Errorf("stage %d: %w", n, p.reg.unknownStage(name, Pos{})))
		return p
	}
	params, err := NewParams(def, args)
	if err != nil {
		for _, e := range Errors(err) {
			p.errs = append(p.errs, fmt.Errorf("stage %d: %w", n, e))
		}
		return p
	}
	p.steps = append(p.steps, Step{Def: def, Params: params})
	return p
}

// WithOptions sets the options Run uses.
func (p *Pipeline) WithOptions(o Options) *Pipeline {
	p.opt = o
	return p
}

// Options returns the options Run uses, as set by WithOptions.
func (p *Pipeline) Options() Options { return p.opt }

// Steps returns the chain built so far.
func (p *Pipeline) Steps() []Step { return append([]Step(nil), p.steps...) }

// String returns the chain as a canonical spec.
func (p *Pipeline) String() string { return FormatSpec(p.steps) }

// Plan checks the chain and binds it, reporting every builder and planner error.
func (p *Pipeline) Plan() (*Plan, error) {
	if len(p.errs) > 0 {
		return nil, joinErrors(p.errs)
	}
	return p.reg.Compile(p.steps)
}

// Run plans the chain and runs it over src into sink with the pipeline's options; see the
// package-level Run for what it returns.
func (p *Pipeline) Run(ctx context.Context, src Source, sink Sink) (Summary, error) {
	plan, err := p.Plan()
	if err != nil {
		return Summary{}, err
	}
	return Run(ctx, plan, src, sink, p.opt)
}
