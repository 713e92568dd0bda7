package pipeline

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// ParamKind is the type of a stage parameter.
type ParamKind int

const (
	// Int parameters hold an integer (int64 range), written in base 10.
	Int ParamKind = iota
	// Float parameters hold a finite float64.
	Float
	// Bool parameters hold true or false.
	Bool
	// Enum parameters hold one of a fixed list of words.
	Enum
	// String parameters hold free text (without spaces or '|' when written in a spec).
	String
)

// String returns the kind's name as `imgpipe stages` prints it.
func (k ParamKind) String() string {
	switch k {
	case Int:
		return "int"
	case Float:
		return "float"
	case Bool:
		return "bool"
	case Enum:
		return "enum"
	case String:
		return "string"
	}
	return fmt.Sprintf("ParamKind(%d)", int(k))
}

// Range bounds an Int or Float parameter. Min is exclusive when MinOpen is set, which lets a
// float parameter say "greater than zero".
type Range struct {
	Min, Max float64
	MinOpen  bool
}

// String formats the range in interval notation, e.g. "(0, 32]".
func (r *Range) String() string {
	open := "["
	if r.MinOpen {
		open = "("
	}
	f := func(x float64) string {
		if math.Abs(x) >= 1e21 { // float32's limits: 3.4e+38, not 39 digits
			return formatFloat(x)
		}
		return strconv.FormatFloat(x, 'f', -1, 64) // whole numbers stay whole: 1099511627776
	}
	return fmt.Sprintf("%s%s, %s]", open, f(r.Min), f(r.Max))
}

// ParamSpec defines one typed parameter of a stage.
type ParamSpec struct {
	// Name is how the parameter is written: key=value in a spec, key: value in YAML.
	Name string
	// Kind is the parameter's type.
	Kind ParamKind
	// Default is the value used when the parameter is not given: an int64, float64, bool
	// or string matching Kind.
	Default any
	// Range bounds Int and Float values; nil means any value of the type.
	Range *Range
	// Values lists the words an Enum accepts.
	Values []string
	// Help is a one-line description.
	Help string
	// AppliesIf, when set, are the conditions (all of them) under which the parameter has
	// an effect; given explicitly where one fails, it is an error naming it, since the
	// stage would silently ignore it (save quality=80 with format=png).
	AppliesIf []ParamIf
}

// ParamIf is a condition on another parameter of the same stage: its value, as a spec
// writes it, is one of Values.
type ParamIf struct {
	Param  string
	Values []string
}

// check reports whether the spec is self-consistent, default included.
func (ps *ParamSpec) check() error {
	if !namePattern.MatchString(ps.Name) {
		return fmt.Errorf("parameter name %q must match %s", ps.Name, namePattern)
	}
	if ps.Help == "" {
		return fmt.Errorf("parameter %s: no help", ps.Name)
	}
	if ps.Kind == Enum && len(ps.Values) == 0 {
		return fmt.Errorf("parameter %s: enum without values", ps.Name)
	}
	if ps.Range != nil && ps.Kind != Int && ps.Kind != Float {
		return fmt.Errorf("parameter %s: a range on a %s", ps.Name, ps.Kind)
	}
	if err := ps.validate(ps.Default); err != nil {
		return fmt.Errorf("parameter %s: default: %w", ps.Name, err)
	}
	return nil
}

// parse turns the text form of a value (from a spec or a YAML scalar) into a validated
// value of the parameter's type.
func (ps *ParamSpec) parse(s string) (any, error) {
	var v any
	switch ps.Kind {
	case Int:
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%s=%s: want an integer", ps.Name, s)
		}
		v = n
	case Float:
		f, err := strconv.ParseFloat(s, 64)
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			return nil, fmt.Errorf("%s=%s: want a number", ps.Name, s)
		}
		v = f
	case Bool:
		b, err := strconv.ParseBool(s)
		if err != nil {
			return nil, fmt.Errorf("%s=%s: want true or false", ps.Name, s)
		}
		v = b
	case Enum, String:
		v = s
	}
	if err := ps.validate(v); err != nil {
		return nil, err
	}
	return v, nil
}

// convert turns a Go value given to the builder into a validated value of the parameter's
// type. Integers of any width are accepted for Int and Float; floats with no fraction for Int.
func (ps *ParamSpec) convert(x any) (any, error) {
	var v any
	switch ps.Kind {
	case Int:
		switch n := x.(type) {
		case int:
			v = int64(n)
		case int32:
			v = int64(n)
		case int64:
			v = n
		case uint32:
			v = int64(n)
		case float64:
			if n != math.Trunc(n) || math.Abs(n) > 1<<53 {
				return nil, fmt.Errorf("%s=%v: want an integer", ps.Name, x)
			}
			v = int64(n)
		}
	case Float:
		switch f := x.(type) {
		case float64:
			if math.IsNaN(f) || math.IsInf(f, 0) {
				return nil, fmt.Errorf("%s=%v: want a finite number", ps.Name, x)
			}
			v = f
		case float32:
			v = float64(f)
		case int:
			v = float64(f)
		case int64:
			v = float64(f)
		}
	case Bool:
		if b, ok := x.(bool); ok {
			v = b
		}
	case Enum, String:
		if s, ok := x.(string); ok {
			v = s
		}
	}
	if v == nil {
		return nil, fmt.Errorf("%s=%v: want a %s, got %T", ps.Name, x, ps.Kind, x)
	}
	if err := ps.validate(v); err != nil {
		return nil, err
	}
	return v, nil
}

// validate checks a value of the parameter's Go type against its range or allowed values.
func (ps *ParamSpec) validate(v any) error {
	switch ps.Kind {
	case Int:
		n, ok := v.(int64)
		if !ok {
			return fmt.Errorf("%s: want an int64 value, got %T", ps.Name, v)
		}
		if r := ps.Range; r != nil && (float64(n) < r.Min || r.MinOpen && float64(n) == r.Min || float64(n) > r.Max) {
			return fmt.Errorf("%s=%d is out of range %s", ps.Name, n, r)
		}
	case Float:
		f, ok := v.(float64)
		if !ok {
			return fmt.Errorf("%s: want a float64 value, got %T", ps.Name, v)
		}
		if r := ps.Range; r != nil && (f < r.Min || r.MinOpen && f == r.Min || f > r.Max) {
			return fmt.Errorf("%s=%s is out of range %s", ps.Name, formatFloat(f), r)
		}
	case Bool:
		if _, ok := v.(bool); !ok {
			return fmt.Errorf("%s: want a bool value, got %T", ps.Name, v)
		}
	case Enum:
		s, ok := v.(string)
		if !ok {
			return fmt.Errorf("%s: want a string value, got %T", ps.Name, v)
		}
		for _, w := range ps.Values {
			if s == w {
				return nil
			}
		}
		msg := fmt.Sprintf("%s=%s: want one of %s", ps.Name, s, strings.Join(ps.Values, ", "))
		if near := Nearest(s, ps.Values); near != "" {
			msg += fmt.Sprintf(" (did you mean %q?)", near)
		}
		return fmt.Errorf("%s", msg)
	case String:
		if _, ok := v.(string); !ok {
			return fmt.Errorf("%s: want a string value, got %T", ps.Name, v)
		}
	default:
		return fmt.Errorf("%s: unknown kind %d", ps.Name, int(ps.Kind))
	}
	return nil
}

// format writes a value the way parse reads it back.
func (ps *ParamSpec) format(v any) string {
	switch x := v.(type) {
	case int64:
		return strconv.FormatInt(x, 10)
	case float64:
		return formatFloat(x)
	case bool:
		return strconv.FormatBool(x)
	case string:
		return x
	}
	return fmt.Sprint(v)
}

// formatFloat gives the shortest text that parses back to f.
func formatFloat(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }

// Params holds a stage's parameter values, parsed and validated against its definition,
// defaults filled in. Build one with NewParams or through the spec parser or YAML loader.
type Params struct {
	def  *StageDef
	vals map[string]any
	set  []string // names given explicitly, in definition order
}

// defaults returns d's parameters with nothing set explicitly.
func defaults(d *StageDef) Params {
	p := Params{def: d, vals: make(map[string]any, len(d.Params))}
	for _, ps := range d.Params {
		p.vals[ps.Name] = ps.Default
	}
	return p
}

// NewParams validates args (Go values: int, int64, float64, bool, string) against d's
// parameters and returns them with defaults filled in. Every problem is reported.
func NewParams(d *StageDef, args map[string]any) (Params, error) {
	p := defaults(d)
	var errs []error
	for _, name := range sortedKeys(args) {
		ps := d.Param(name)
		if ps == nil {
			errs = append(errs, unknownParam(d, name))
			continue
		}
		v, err := ps.convert(args[name])
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", d.Name, err))
			continue
		}
		p.vals[name] = v
	}
	p.fixSet(args)
	if len(errs) == 0 {
		for _, name := range p.set {
			if err := p.applies(name); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return p, joinErrors(errs)
}

// applies says why the parameter name, given explicitly, has no effect with the values of
// the others (its ParamSpec.AppliesIf), or returns nil when it has one.
func (p Params) applies(name string) error {
	ps := p.def.Param(name)
	for _, c := range ps.AppliesIf {
		v := p.def.Param(c.Param).format(p.vals[c.Param])
		if slices.Contains(c.Values, v) {
			continue
		}
		how := "the default "
		if slices.Contains(p.set, c.Param) {
			how = ""
		}
		return fmt.Errorf("%s: %s=%s has no effect with %s%s=%s (it applies to %s=%s only); drop it",
			p.def.Name, name, ps.format(p.vals[name]), how, c.Param, v, c.Param, strings.Join(c.Values, "|"))
	}
	return nil
}

// fixSet records which parameters were given, in definition order.
func (p *Params) fixSet(given map[string]any) {
	p.set = p.set[:0]
	for _, ps := range p.def.Params {
		if _, ok := given[ps.Name]; ok {
			p.set = append(p.set, ps.Name)
		}
	}
}

func unknownParam(d *StageDef, name string) error {
	names := make([]string, len(d.Params))
	for i, ps := range d.Params {
		names[i] = ps.Name
	}
	msg := fmt.Sprintf("%s has no parameter %q", d.Name, name)
	if near := Nearest(name, names); near != "" {
		msg += fmt.Sprintf(" (did you mean %q?)", near)
	} else if len(names) == 0 {
		msg += " (it takes none)"
	} else {
		msg += fmt.Sprintf(" (it takes %s)", strings.Join(names, ", "))
	}
	return fmt.Errorf("%s", msg)
}

// Given reports whether the parameter was written in the spec, not left at its default.
func (p Params) Given(name string) bool { return slices.Contains(p.set, name) }

func (p Params) get(name string) any {
	v, ok := p.vals[name]
	if !ok {
		// A programming error in a stage definition, not a user error.
		panic(fmt.Sprintf("pipeline: stage %s has no parameter %s", p.def.Name, name))
	}
	return v
}

// Int returns an Int parameter's value.
func (p Params) Int(name string) int64 { return p.get(name).(int64) }

// Float returns a Float parameter's value.
func (p Params) Float(name string) float64 { return p.get(name).(float64) }

// Bool returns a Bool parameter's value.
func (p Params) Bool(name string) bool { return p.get(name).(bool) }

// Str returns an Enum or String parameter's value.
func (p Params) Str(name string) string { return p.get(name).(string) }

// String writes the explicitly given parameters as "k=v k=v", in definition order; it is
// how the parameters appear in a canonical spec.
func (p Params) String() string {
	var b strings.Builder
	for i, name := range p.set {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(name)
		b.WriteByte('=')
		b.WriteString(p.def.Param(name).format(p.vals[name]))
	}
	return b.String()
}

// All returns every parameter value, defaults included, keyed by name.
func (p Params) All() map[string]any {
	out := make(map[string]any, len(p.vals))
	for k, v := range p.vals {
		out[k] = v
	}
	return out
}
