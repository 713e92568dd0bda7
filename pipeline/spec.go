package pipeline

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Limits on specs: far above any real chain, low enough that hostile input stays cheap.
const (
	maxSpecBytes = 64 << 10
	// MaxSteps bounds the number of stages in one chain, however it is written (a spec, a
	// YAML job's pipeline list, the Go builder).
	MaxSteps = 256
)

// Step is one stage of a chain with its parameters parsed and validated, or, with Err set,
// a stage that failed to parse.
type Step struct {
	Def    *StageDef
	Params Params
	// Pos is where the stage was written, for error messages.
	Pos Pos
	// Err holds the problems of a stage that failed to parse (its Def is nil when the
	// name itself is unknown). Compile reports them and checks only the stage's place in
	// the chain, so that one pass shows every problem of a chain.
	Err error
}

// String writes the step the way a spec writes it: "blur sigma=1.5".
func (s Step) String() string {
	if ps := s.Params.String(); ps != "" {
		return s.Def.Name + " " + ps
	}
	return s.Def.Name
}

// FormatSpec writes steps as a canonical spec, "decode | blur sigma=1.5 | save". Parsing
// the result gives the same steps.
func FormatSpec(steps []Step) string {
	parts := make([]string, len(steps))
	for i, s := range steps {
		parts[i] = s.String()
	}
	return strings.Join(parts, " | ")
}

// ParseSpec parses a chain written as "decode | grayscale | blur sigma=1.5 | save format=png"
// against the builtin stages. Stages are separated by '|'; parameters follow the stage
// name as key=value, separated by spaces. Errors are *PosError values (inside an ErrorList
// when there are several) giving the 1-based column; every problem is reported. On error
// the steps are still returned, unless the spec holds no stage at all: each one that failed
// has Err set, so that Compile(steps) reports the same problems together with the chain's
// own (order, and values that only make sense together). CompileSpec does both.
func ParseSpec(spec string) ([]Step, error) { return Builtin.ParseSpec(spec) }

// ParseSpec is the package-level ParseSpec over r's stages.
func (r *Registry) ParseSpec(spec string) ([]Step, error) {
	if len(spec) > maxSpecBytes {
		return nil, errorAt(Pos{Col: 1}, "spec is %d bytes, over the %d-byte limit", len(spec), maxSpecBytes)
	}
	col := func(off int) int { return utf8.RuneCountInString(spec[:off]) + 1 }
	if strings.TrimSpace(spec) == "" {
		return nil, errorAt(Pos{Col: 1}, "empty pipeline spec (try %q)", "decode | grayscale | save")
	}
	var (
		steps []Step
		errs  []error
		start int
	)
	for i := 0; i <= len(spec); i++ {
		if i < len(spec) && spec[i] != '|' {
			continue
		}
		toks := tokens(spec[start:i], start)
		if len(steps) >= MaxSteps {
			return nil, errorAt(Pos{Col: col(start)}, "more than %d stages", MaxSteps)
		}
		var st Step
		switch {
		case len(toks) == 0 && i == len(spec):
			st = failedStep(Pos{Col: col(start)}, "nothing after the last '|'")
		case len(toks) == 0:
			st = failedStep(Pos{Col: col(i)}, "empty stage before '|'")
		default:
			st = r.parseStage(toks, col)
		}
		if st.Err != nil {
			errs = append(errs, st.Err)
		}
		steps = append(steps, st)
		start = i + 1
	}
	return steps, joinErrors(errs)
}

// CompileSpec parses a spec and compiles its chain, reporting every problem of both in one
// pass; see ParseSpec and Compile.
func CompileSpec(spec string) (*Plan, error) { return Builtin.CompileSpec(spec) }

// CompileSpec is the package-level CompileSpec over r's stages.
func (r *Registry) CompileSpec(spec string) (*Plan, error) {
	steps, err := r.ParseSpec(spec)
	if steps == nil {
		return nil, err
	}
	return r.Compile(steps) // it reports the failed steps' Err too
}

// failedStep is a step that holds only a problem at pos.
func failedStep(pos Pos, format string, args ...any) Step {
	return Step{Pos: pos, Err: errorAt(pos, format, args...)}
}

type token struct {
	text string
	off  int // byte offset in the whole spec
}

// tokens splits s (which starts at byte off of the spec) at runs of white space.
func tokens(s string, off int) []token {
	var out []token
	i := 0
	for i < len(s) {
		for i < len(s) && isSpace(s[i]) {
			i++
		}
		j := i
		for j < len(s) && !isSpace(s[j]) {
			j++
		}
		if j > i {
			out = append(out, token{text: s[i:j], off: off + i})
		}
		i = j
	}
	return out
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// parseStage parses "name k=v k=v".
func (r *Registry) parseStage(toks []token, col func(int) int) Step {
	name := toks[0]
	at := Pos{Col: col(name.off)}
	def, err := r.LookupAt(name.text, at)
	if err != nil {
		return Step{Pos: at, Err: err}
	}
	var errs []error
	args := map[string]string{}
	argPos := map[string]Pos{}
	for _, t := range toks[1:] {
		pos := Pos{Col: col(t.off)}
		k, v, found := strings.Cut(t.text, "=")
		switch {
		case !found || k == "":
			errs = append(errs, errorAt(pos, "%q is not key=value (%s)", t.text, takes(def)))
			continue
		case def.Param(k) == nil:
			errs = append(errs, &PosError{Pos: pos, Err: unknownParam(def, k)})
			continue
		case v == "":
			errs = append(errs, errorAt(pos, "%s: no value after %s=", def.Name, k))
			continue
		}
		if _, dup := args[k]; dup {
			errs = append(errs, errorAt(pos, "%s: %s given twice (first at %s)", def.Name, k, argPos[k]))
			continue
		}
		args[k] = v
		argPos[k] = Pos{Col: col(t.off + len(k) + 1)}
	}
	p, err := ParseParams(def, args, argPos)
	if err != nil {
		errs = append(errs, err)
	}
	return Step{Def: def, Params: p, Pos: at, Err: joinErrors(errs)}
}

// ParseParams parses parameter values written as text (in a spec, or as YAML scalars)
// against def's parameters and returns them with defaults filled in; it is NewParams for
// text. pos locates each value for error messages: every problem is a *PosError at its
// value's position, all of them reported, a name def does not take included.
func ParseParams(def *StageDef, args map[string]string, pos map[string]Pos) (Params, error) {
	p := defaults(def)
	var errs []error
	given := map[string]any{}
	for _, k := range sortedKeys(args) {
		ps := def.Param(k)
		if ps == nil {
			errs = append(errs, &PosError{Pos: pos[k], Err: unknownParam(def, k)})
			continue
		}
		v, err := ps.parse(args[k])
		if err != nil {
			errs = append(errs, &PosError{Pos: pos[k], Err: fmt.Errorf("%s: %w", def.Name, err)})
			continue
		}
		p.vals[k] = v
		given[k] = v
	}
	p.fixSet(given)
	if len(errs) == 0 {
		for _, k := range p.set {
			if err := p.applies(k); err != nil {
				errs = append(errs, &PosError{Pos: pos[k], Err: err})
			}
		}
	}
	return p, joinErrors(errs)
}

// LookupAt returns the stage called name, or, when r has none, a *PosError at pos that
// names the nearest stage ("unknown stage "blurr" (did you mean "blur"?)") or lists them all.
func (r *Registry) LookupAt(name string, pos Pos) (*StageDef, error) {
	if def, ok := r.Lookup(name); ok {
		return def, nil
	}
	return nil, r.unknownStage(name, pos)
}

func (r *Registry) unknownStage(name string, pos Pos) error {
	if near := Nearest(name, r.names()); near != "" {
		return errorAt(pos, "unknown stage %q (did you mean %q?)", name, near)
	}
	return errorAt(pos, "unknown stage %q (stages: %s)", name, strings.Join(r.names(), ", "))
}

// takes describes a stage's parameters for error messages.
func takes(def *StageDef) string {
	if len(def.Params) == 0 {
		return def.Name + " takes no parameters"
	}
	names := make([]string, len(def.Params))
	for i, ps := range def.Params {
		names[i] = ps.Name
	}
	return def.Name + " takes " + strings.Join(names, ", ")
}
