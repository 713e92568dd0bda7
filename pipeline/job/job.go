// Package job reads imgpipe's YAML job files: where the inputs are, the chain (written as a
// list of stages or as a spec), where outputs and the report go, and the execution settings.
// Every problem in a file is reported at once, each as a *pipeline.PosError naming
// file:line:col. It is the only package of the module that imports a YAML library, so a Go
// program that builds its chains with package pipeline does not pull one in.
package job

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v4"

	"github.com/imgpipe/imgpipe/fsguard"
	"github.com/imgpipe/imgpipe/pipeline"
)

// maxJobBytes bounds a job file; real ones are a few hundred bytes.
const maxJobBytes = 1 << 20

// maxAliasNodes bounds the nodes that a job's aliases stand for, all together: the loader
// follows aliases, so aliases of aliases (billion laughs) would make a small file a walk
// of billions of nodes. Real jobs alias a few settings.
const maxAliasNodes = 10_000

// Job is a YAML job file, checked and with its chain parsed:
//
//	input:  {dir: samples/images}
//	pipeline:
//	  - decode
//	  - grayscale
//	  - blur: {sigma: 1.5}
//	  - save: {format: png}
//	output: {dir: out, report: out/imgpipe-report.jsonl}
//	execution: {device: auto, streams: 2, batch: 16, workers: 0, on_error: skip}
//
// A pipeline item is a bare stage name, a one-key mapping from the name to its parameters,
// or a one-stage spec ("blur sigma=1.5"); the whole pipeline may also be one spec string.
// Paths are taken as written, relative to the working directory, like the CLI's flags.
type Job struct {
	// File is the job's file name, used in error positions.
	File string
	// InputDir is input.dir.
	InputDir string
	// Steps is the parsed chain.
	Steps []pipeline.Step
	// Plan is Steps compiled when the job was read, so that a run binds its stages once;
	// nil when the job has no chain.
	Plan *pipeline.Plan
	// OutputDir is output.dir.
	OutputDir string
	// Report is output.report; "" means OUT_DIR/imgpipe-report.jsonl.
	Report string
	// Exec holds the execution mapping over pipeline.DefaultExecution.
	Exec pipeline.Execution

	pos map[string]pipeline.Pos
}

// PosOf returns where a field ("input.dir", "output.dir", "execution.device", ...) was
// written, or the file alone when it was not.
func (j *Job) PosOf(field string) pipeline.Pos {
	if p, ok := j.pos[field]; ok {
		return p
	}
	return pipeline.Pos{File: j.File}
}

// Load reads and parses a job file against the builtin stages (pipeline.Builtin); it must
// be a regular file (a job on stdin goes through Read).
func Load(path string) (*Job, error) {
	f, _, err := fsguard.Open(path, fsguard.FollowLinks) // a FIFO or a device is refused, not waited on
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return Read(path, f)
}

// Read reads a job from r (stdin, say), named name in errors, and parses it as Parse does;
// it reads at most one byte past the size limit.
func Read(name string, r io.Reader) (*Job, error) {
	data, err := io.ReadAll(io.LimitReader(r, maxJobBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return Parse(name, data)
}

// Parse parses a job's YAML against the builtin stages (pipeline.Builtin); file names it in
// errors. See ParseWith.
func Parse(file string, data []byte) (*Job, error) { return ParseWith(pipeline.Builtin, file, data) }

// ParseWith parses a job's YAML against r's stages, so a job can name custom stages.
// Unknown keys, duplicate keys, values of the wrong type or out of range, and chains the
// planner refuses are all errors; every one is reported, each as a *pipeline.PosError with
// file:line:col. Required fields that CLI flags can supply are checked by Complete, not here.
// When the YAML is well-formed but has such errors, the job is returned too, holding every
// field that was valid, so that a validator can go on to check its paths; on a syntax error
// the job is nil.
func ParseWith(r *pipeline.Registry, file string, data []byte) (*Job, error) {
	j := &Job{File: file, Exec: pipeline.DefaultExecution(), pos: map[string]pipeline.Pos{}}
	if len(data) > maxJobBytes {
		return nil, errorAt(pipeline.Pos{File: file}, "job file is over the %d-byte limit", maxJobBytes)
	}
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errorAt(pipeline.Pos{File: file, Line: 1, Col: 1}, "empty job file (it needs at least input and pipeline)")
		}
		return nil, yamlError(file, err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		return nil, errorAt(pipeline.Pos{File: file, Line: extra.Line, Col: extra.Column}, "a job file holds one YAML document; this is a second")
	} else if !errors.Is(err, io.EOF) {
		return nil, yamlError(file, err)
	}
	if n := aliasedNodes(&doc); n > maxAliasNodes {
		return nil, errorAt(pipeline.Pos{File: file, Line: 1, Col: 1}, "its aliases stand for more than %d nodes: a job file never needs that many (a YAML bomb?)", maxAliasNodes)
	}
	l := &jobLoader{reg: r, job: j}
	l.root(&doc)
	return j, join(l.errs)
}

var yamlLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// yamlError turns a YAML syntax error into one at file:line:col: where the parser found the
// problem, with where the construct it was reading started when that is elsewhere ("did
// not find expected ',' or '}' (while parsing a flow mapping at 1:8)").
func yamlError(file string, err error) error {
	var le *yaml.LoadError
	if errors.As(err, &le) && le.Mark.Line > 0 {
		msg := le.Message
		if c := le.ContextMark; le.ContextMsg != "" && c.Line > 0 && (c.Line != le.Mark.Line || c.Column != le.Mark.Column) {
			msg += fmt.Sprintf(" (%s at %d:%d)", le.ContextMsg, c.Line, c.Column)
		}
		return errorAt(pipeline.Pos{File: file, Line: le.Mark.Line, Col: le.Mark.Column}, "YAML syntax: %s", msg)
	}
	msg := err.Error()
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		line, _ := strconv.Atoi(m[1])
		return errorAt(pipeline.Pos{File: file, Line: line}, "YAML syntax: %s", m[2])
	}
	return errorAt(pipeline.Pos{File: file}, "YAML syntax: %s", strings.TrimPrefix(msg, "yaml: "))
}

// Complete checks that the job says everything a run needs: an input folder, a chain, and
// an output folder (unless the chain saves nothing and a report path is given).
func (j *Job) Complete() error {
	var errs []error
	top := pipeline.Pos{File: j.File}
	if j.File != "" {
		top.Line, top.Col = 1, 1
	}
	if j.InputDir == "" {
		errs = append(errs, errorAt(top, "no input folder: set input.dir in the job or -i"))
	}
	if len(j.Steps) == 0 {
		errs = append(errs, errorAt(top, "no pipeline: set pipeline in the job or -p"))
	}
	if j.OutputDir == "" {
		saves := false
		for _, s := range j.Steps {
			saves = saves || s.Def.Kind == pipeline.SinkKind
		}
		if saves || j.Report == "" {
			errs = append(errs, errorAt(top, "no output folder: set output.dir in the job or -o"))
		}
	}
	return join(errs)
}

type jobLoader struct {
	reg  *pipeline.Registry
	job  *Job
	errs []error
}

func (l *jobLoader) pos(n *yaml.Node) pipeline.Pos {
	return pipeline.Pos{File: l.job.File, Line: n.Line, Col: n.Column}
}

func (l *jobLoader) errorf(n *yaml.Node, format string, args ...any) {
	l.errs = append(l.errs, errorAt(l.pos(n), format, args...))
}

// aliasedNodes is how many more nodes the document stands for with its aliases expanded
// than it holds (saturating just past maxAliasNodes), counted with each anchored node's
// expanded size kept, so that a bomb is measured, not expanded.
func aliasedNodes(doc *yaml.Node) int {
	own := 0
	var count func(n *yaml.Node)
	count = func(n *yaml.Node) {
		own++
		for _, c := range n.Content {
			count(c)
		}
	}
	count(doc)
	limit := own + maxAliasNodes + 1
	expanded := map[*yaml.Node]int{}
	var size func(n *yaml.Node) int
	size = func(n *yaml.Node) int {
		if n.Kind == yaml.AliasNode && n.Alias != nil {
			if s, ok := expanded[n.Alias]; ok {
				return s
			}
			expanded[n.Alias] = limit // an alias inside its own anchor
			s := size(n.Alias)
			expanded[n.Alias] = s
			return s
		}
		total := 1
		for _, c := range n.Content {
			total = min(total+size(c), limit)
		}
		return total
	}
	return size(doc) - own
}

// resolve follows aliases, so anchors work as YAML users expect.
func resolve(n *yaml.Node) *yaml.Node {
	for i := 0; n != nil && n.Kind == yaml.AliasNode && i < 16; i++ {
		n = n.Alias
	}
	return n
}

func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		if n.Tag == "!!null" {
			return "nothing"
		}
		return fmt.Sprintf("%q", n.Value)
	}
	return "an alias"
}

// mapping walks a mapping node: each key must be one of known, at most once; fn handles the
// value of each known key. It returns false when n is not a mapping.
func (l *jobLoader) mapping(what string, n *yaml.Node, known []string, fn func(key string, k, v *yaml.Node)) bool {
	n = resolve(n)
	if n.Kind != yaml.MappingNode {
		l.errorf(n, "%s: want a mapping (key: value), got %s", what, describe(n))
		return false
	}
	seen := map[string]*yaml.Node{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := resolve(n.Content[i]), resolve(n.Content[i+1])
		if k.Kind != yaml.ScalarNode {
			l.errorf(k, "%s: keys must be plain words, got %s", what, describe(k))
			continue
		}
		if first, dup := seen[k.Value]; dup {
			l.errorf(k, "%s: key %q given twice (first at line %d)", what, k.Value, first.Line)
			continue
		}
		seen[k.Value] = k
		if !slices.Contains(known, k.Value) {
			msg := fmt.Sprintf("%s: unknown key %q", what, k.Value)
			if near := pipeline.Nearest(k.Value, known); near != "" {
				msg += fmt.Sprintf(" (did you mean %q?)", near)
			} else {
				msg += " (keys: " + strings.Join(known, ", ") + ")"
			}
			l.errorf(k, "%s", msg)
			continue
		}
		fn(k.Value, k, v)
	}
	return true
}

// scalar returns a scalar's text, or records an error for any other node.
func (l *jobLoader) scalar(what string, n *yaml.Node) (string, bool) {
	if n.Kind != yaml.ScalarNode || n.Tag == "!!null" {
		l.errorf(n, "%s: want a value, got %s", what, describe(n))
		return "", false
	}
	return n.Value, true
}

// text reads a non-empty string field and remembers where it was written.
func (l *jobLoader) text(field string, n *yaml.Node, dst *string) {
	if s, ok := l.scalar(field, n); ok {
		if s == "" {
			l.errorf(n, "%s: empty", field)
			return
		}
		*dst = s
		l.job.pos[field] = l.pos(n)
	}
}

func (l *jobLoader) root(doc *yaml.Node) {
	root := doc
	if doc.Kind == yaml.DocumentNode && len(doc.Content) == 1 {
		root = doc.Content[0]
	}
	if root.Kind == yaml.ScalarNode && root.Tag == "!!null" {
		l.errorf(root, "empty job file (it needs at least input and pipeline)")
		return
	}
	l.mapping("job", root, []string{"input", "pipeline", "output", "execution"}, func(key string, k, v *yaml.Node) {
		l.job.pos[key] = l.pos(k)
		switch key {
		case "input":
			l.mapping("input", v, []string{"dir"}, func(_ string, _, v *yaml.Node) {
				l.text("input.dir", v, &l.job.InputDir)
			})
		case "output":
			l.mapping("output", v, []string{"dir", "report"}, func(key string, _, v *yaml.Node) {
				if key == "dir" {
					l.text("output.dir", v, &l.job.OutputDir)
				} else {
					l.text("output.report", v, &l.job.Report)
				}
			})
		case "execution":
			settings := pipeline.ExecutionSettings()
			names := make([]string, len(settings))
			for i, ps := range settings {
				names[i] = ps.Name
			}
			l.mapping("execution", v, names, func(key string, _, v *yaml.Node) {
				field := "execution." + key
				if n := resolve(v); key == "gpu" && n.Kind == yaml.SequenceNode {
					v = gpuList(n) // gpu: [0, 2, 3] is gpu: 0,2,3
				}
				if s, ok := l.scalar(field, v); ok {
					if err := l.job.Exec.SetText(key, s); err != nil {
						l.errorf(v, "%s: %v", field, err)
					} else {
						l.job.pos[field] = l.pos(v)
					}
				}
			})
		case "pipeline":
			l.pipeline(v)
		}
	})
}

// gpuList is the scalar that a gpu list stands for: its items comma-separated, for the
// setting to check; an item that is not a scalar leaves the list, which the caller refuses.
func gpuList(n *yaml.Node) *yaml.Node {
	items := make([]string, len(n.Content))
	for i, c := range n.Content {
		if c = resolve(c); c.Kind != yaml.ScalarNode {
			return n
		}
		items[i] = c.Value
	}
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: strings.Join(items, ","), Line: n.Line, Column: n.Column}
}

func (l *jobLoader) pipeline(n *yaml.Node) {
	n = resolve(n)
	var steps []pipeline.Step
	switch {
	case n.Kind == yaml.ScalarNode && n.Tag != "!!null":
		steps = l.specScalar(n, false)
	case n.Kind == yaml.SequenceNode:
		if len(n.Content) == 0 {
			l.errorf(n, "pipeline: empty list (start with decode)")
			return
		}
		if len(n.Content) > pipeline.MaxSteps {
			l.errorf(n, "pipeline: %d stages, over the limit of %d", len(n.Content), pipeline.MaxSteps)
			return
		}
		for _, item := range n.Content {
			steps = append(steps, l.item(resolve(item)))
		}
	default:
		l.errorf(n, "pipeline: want a list of stages or a spec string, got %s", describe(n))
		return
	}
	// Compile reports the stages that failed to parse (their Err) with the chain's own
	// problems, so one pass shows them all.
	plan, err := l.reg.Compile(steps)
	if err != nil {
		for _, e := range pipeline.Errors(err) {
			l.errs = append(l.errs, l.inFile(e))
		}
		return
	}
	l.job.Steps, l.job.Plan = steps, plan
}

// inFile makes sure an error names the job file.
func (l *jobLoader) inFile(e error) error {
	var pe *pipeline.PosError
	if errors.As(e, &pe) && pe.Pos.File == "" {
		return &pipeline.PosError{Pos: pipeline.Pos{File: l.job.File, Line: pe.Pos.Line, Col: pe.Pos.Col}, Err: pe.Err}
	}
	if !errors.As(e, &pe) {
		return &pipeline.PosError{Pos: pipeline.Pos{File: l.job.File}, Err: e}
	}
	return e
}

// failed returns a step that holds the problems recorded since before (taking them out of
// l.errs): Compile reports them and checks only the stage's place in the chain. def is nil
// when the stage is not known.
func (l *jobLoader) failed(before int, def *pipeline.StageDef, pos pipeline.Pos) pipeline.Step {
	err := join(l.errs[before:])
	l.errs = l.errs[:before]
	return pipeline.Step{Def: def, Pos: pos, Err: err}
}

// item parses one pipeline list item.
func (l *jobLoader) item(n *yaml.Node) pipeline.Step {
	before := len(l.errs)
	switch {
	case n.Kind == yaml.ScalarNode && n.Tag != "!!null":
		steps := l.specScalar(n, true)
		return steps[0]
	case n.Kind == yaml.MappingNode:
		if len(n.Content) != 2 {
			var keys []string
			for i := 0; i < len(n.Content); i += 2 {
				keys = append(keys, n.Content[i].Value)
			}
			l.errorf(n, "pipeline item: one stage per item, found keys %s (write parameters as `- blur: {sigma: 1.5}`, or indent them under the stage)", strings.Join(keys, ", "))
			return l.failed(before, nil, l.pos(n))
		}
		k, v := resolve(n.Content[0]), resolve(n.Content[1])
		if k.Kind != yaml.ScalarNode {
			l.errorf(k, "pipeline item: want a stage name, got %s", describe(k))
			return l.failed(before, nil, l.pos(k))
		}
		def, err := l.reg.LookupAt(k.Value, l.pos(k))
		if err != nil {
			l.errs = append(l.errs, l.inFile(err))
			return l.failed(before, nil, l.pos(k))
		}
		args := map[string]string{}
		argPos := map[string]pipeline.Pos{}
		if !(v.Kind == yaml.ScalarNode && v.Tag == "!!null") {
			var names []string
			for _, ps := range def.Params {
				names = append(names, ps.Name)
			}
			if len(names) == 0 {
				l.errorf(v, "%s takes no parameters", def.Name)
				return l.failed(before, def, l.pos(k))
			}
			l.mapping(def.Name, v, names, func(key string, _, pv *yaml.Node) {
				if s, ok := l.scalar(def.Name+"."+key, pv); ok {
					args[key] = s
					argPos[key] = l.pos(pv)
				}
			})
		}
		p, err := pipeline.ParseParams(def, args, argPos)
		for _, e := range pipeline.Errors(err) {
			l.errs = append(l.errs, l.inFile(e))
		}
		if len(l.errs) > before {
			return l.failed(before, def, l.pos(k))
		}
		return pipeline.Step{Def: def, Params: p, Pos: l.pos(k)}
	}
	l.errorf(n, "pipeline item: want a stage name or `name: {params}`, got %s", describe(n))
	return l.failed(before, nil, l.pos(n))
}

// specScalar parses a scalar as a spec, placing errors at their line:col in the file. With
// one set, the scalar must hold exactly one stage. It returns at least one step; problems
// are in the steps' Err.
func (l *jobLoader) specScalar(n *yaml.Node, one bool) []pipeline.Step {
	// Columns inside the scalar map to the file only for one-line scalars; quotes shift by one.
	shift := n.Column - 1
	if n.Style == yaml.DoubleQuotedStyle || n.Style == yaml.SingleQuotedStyle {
		shift++
	}
	oneLine := !strings.Contains(n.Value, "\n") && n.Style != yaml.LiteralStyle && n.Style != yaml.FoldedStyle
	place := func(p pipeline.Pos) pipeline.Pos {
		if oneLine {
			return pipeline.Pos{File: l.job.File, Line: n.Line, Col: p.Col + shift}
		}
		return l.pos(n)
	}
	inScalar := func(err error) error {
		var out []error
		for _, e := range pipeline.Errors(err) {
			var pe *pipeline.PosError
			if errors.As(e, &pe) {
				e = &pipeline.PosError{Pos: place(pe.Pos), Err: pe.Err}
			}
			out = append(out, l.inFile(e))
		}
		return join(out)
	}
	steps, err := l.reg.ParseSpec(n.Value)
	if len(steps) == 0 {
		return []pipeline.Step{{Pos: l.pos(n), Err: inScalar(err)}}
	}
	for i := range steps {
		steps[i].Pos = place(steps[i].Pos)
		steps[i].Err = inScalar(steps[i].Err)
	}
	if one && len(steps) != 1 {
		before := len(l.errs)
		l.errorf(n, "pipeline item: one stage per item, found %d (make each stage its own item)", len(steps))
		for _, s := range steps {
			l.errs = append(l.errs, pipeline.Errors(s.Err)...)
		}
		return []pipeline.Step{l.failed(before, nil, l.pos(n))}
	}
	return steps
}

func errorAt(pos pipeline.Pos, format string, args ...any) *pipeline.PosError {
	return &pipeline.PosError{Pos: pos, Err: fmt.Errorf(format, args...)}
}

// join returns nil for no errors and a pipeline.ErrorList otherwise, flattening nested lists.
func join(errs []error) error {
	var out pipeline.ErrorList
	for _, e := range errs {
		out = append(out, pipeline.Errors(e)...)
	}
	if len(out) == 0 {
		return nil
	}
	return out
}
