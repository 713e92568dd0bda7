package pipeline

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/imgpipe/imgpipe/cudastage/sched"
	"github.com/imgpipe/imgpipe/stages"
	"github.com/imgpipe/imgpipe/stages/npy"
)

// Float32 arrays flow through the engine as items of their own kind: a chain that starts
// with load (a source stage with NewLoader) reads .npy files into npy.Arrays and holds
// array stages (ArrayKind) instead of pixel stages; Compile refuses a pixel stage in such a
// chain (but the kernel stage, StageDef.ArrayGPU) and an array stage in an image chain. On
// a GPU run the array stages run as one device segment of array ops (arraygpu.go), with
// the CPU path's bits.

// ArrayFunc runs a bound array stage on the CPU. An elementwise stage changes a.Data in
// place; a reduction (StageDef.Reduces) only reads it and returns its value. An error
// fails the input (min of an empty array).
type ArrayFunc func(a *npy.Array) (float32, error)

// Loader is a bound source stage that reads float32 arrays.
type Loader struct {
	// MaxElements is the element limit checked against a file's header before anything is
	// allocated for its data.
	MaxElements int64
}

// ArrayStep is an array stage of a plan with its implementations bound.
type ArrayStep struct {
	Step
	// Run is the bound CPU implementation; nil for a GPU-only stage (kernel).
	Run ArrayFunc
	// GPU is the bound device op (sched.Op.Array), or nil when the stage has no GPU
	// implementation.
	GPU *sched.Op
}

// Reduction is one reduction's value for the report.
type Reduction struct {
	// Stage is the reducing stage's name (sum, min, max): its key in the report.
	Stage string
	Value float32
}

// npyFormat is save's format name (stages.SaveFormats) that also writes float32 arrays.
const npyFormat = "npy"

// DefaultMaxElements is load's default element limit: 400 MB of float32 data, the bytes
// of decode's default pixel limit as RGB plus a margin.
const DefaultMaxElements = 100 << 20

// float32Range is the range of a float32 parameter: finite single-precision values.
var float32Range = &Range{Min: -math.MaxFloat32, Max: math.MaxFloat32}

// isArrayChain reports whether steps start with a source stage that loads arrays.
func isArrayChain(steps []Step) bool {
	return len(steps) > 0 && steps[0].Def != nil && steps[0].Def.NewLoader != nil
}

// compileArrayStep binds an array stage into plan, or refuses a stage of the wrong data:
// a pixel stage in an array chain (arrays set) unless it takes arrays too (ArrayGPU), an
// array stage in an image chain. seen holds the reductions met so far. It returns the
// problem, if any.
func compileArrayStep(plan *Plan, s Step, arrays bool, seen map[string]bool) error {
	switch s.Def.Kind {
	case PixelKind:
		if s.Def.ArrayGPU == nil {
			return fmt.Errorf("stage %s takes images, but %s gives float32 arrays: use array stages (%s)", s.Def.Name, stageLoad, arrayStageNames())
		}
		args, err := s.Def.ArrayGPU(s.Params)
		if err != nil {
			return fmt.Errorf("%s: %v", s.Def.Name, err)
		}
		op := sched.Op{Name: s.Def.Name, Spec: opSpec(s), Array: true, Args: args}
		plan.Arrays = append(plan.Arrays, ArrayStep{Step: s, GPU: &op})
	case ArrayKind:
		if !arrays {
			return fmt.Errorf("stage %s takes float32 arrays: start the chain with %s, not an image source", s.Def.Name, stageLoad)
		}
		if s.Def.Reduces {
			if seen[s.Def.Name] {
				return fmt.Errorf("a chain holds %s at most once (the report has one value per reduction)", s.Def.Name)
			}
			seen[s.Def.Name] = true
		}
		run, err := s.Def.Array(s.Params)
		if err != nil {
			return fmt.Errorf("%s: %v", s.Def.Name, err)
		}
		as := ArrayStep{Step: s, Run: run}
		if s.Def.GPU != nil {
			op, err := bindArrayOp(s, run)
			if err != nil {
				return fmt.Errorf("%s: %v", s.Def.Name, err)
			}
			as.GPU = &op
		}
		plan.Arrays = append(plan.Arrays, as)
	}
	return nil
}

// arrayStageNames lists the builtin array stages for messages.
func arrayStageNames() string {
	var names []string
	for _, d := range Builtin.Stages() {
		if d.Kind == ArrayKind {
			names = append(names, d.Name)
		}
	}
	return strings.Join(names, ", ")
}

// processArray runs an array chain on one input on the CPU: read the .npy file, run the
// array stages in place, and hand the array to the sink.
func (r *Runner) processArray(it *Item, w *Worker) {
	a, release, ok := r.readArray(it, w)
	if !ok {
		return
	}
	defer release()
	r.cpuArrayChain(it, w, a)
}

// readArray reads an input's array for the load stage, with its shape into the result.
// ok is false when the input failed or, the run ending, was dropped; otherwise release
// gives back the memory charged for it.
func (r *Runner) readArray(it *Item, w *Worker) (a *npy.Array, release func(), ok bool) {
	defer func() {
		if p := recover(); p != nil {
			failWith(&it.res, stageLoad, fmt.Errorf("panic: %v", p))
			a, release, ok = nil, nil, false
		}
	}()
	t0 := time.Now()
	a, release, err := r.loadArray(it.in)
	r.span(w.track, stageLoad, it.in.Name, t0)
	switch {
	case err != nil && r.ctx.Err() != nil && errors.Is(err, r.ctx.Err()):
		it.dropped = true
		return nil, nil, false
	case err != nil:
		failWith(&it.res, stageLoad, err)
		return nil, nil, false
	}
	it.res.Shape = append([]int{}, a.Shape...)
	return a, release, true
}

// cpuArrayChain runs the array stages on a on the CPU, in place, and hands the array to
// the sink.
func (r *Runner) cpuArrayChain(it *Item, w *Worker, a *npy.Array) {
	res := &it.res
	stage := stageLoad
	defer func() {
		if p := recover(); p != nil {
			failWith(res, stage, fmt.Errorf("panic: %v", p))
		}
	}()
	chainStart := time.Now()
	for _, as := range r.plan.Arrays {
		stage = as.Def.Name
		if as.Run == nil {
			failWith(res, stage, fmt.Errorf("stage %s runs only on a GPU (%s), and this array cannot go to the device", stage, as.Def.GPUOnly))
			return
		}
		t0 := time.Now()
		v, err := as.Run(a)
		r.span(w.track, stage, it.in.Name, t0)
		if err != nil {
			failWith(res, stage, err)
			return
		}
		if as.Def.Reduces {
			res.Reductions = append(res.Reductions, Reduction{Stage: as.Def.Name, Value: v})
		}
	}
	since(&r.phases.chain, chainStart)
	r.storeArray(it, w.track, a)
}

// storeArray hands an array chain's result a to the sink, with the save stage's encoder
// bound to it.
func (r *Runner) storeArray(it *Item, track string, a *npy.Array) {
	it.res.Array = a
	var enc *Encoder
	if save := r.plan.Save; save != nil {
		enc = &Encoder{Ext: save.Ext, Name: save.ArrayName, Options: save.Options, Encode: func(w io.Writer, _ *stages.Image) error {
			return save.EncodeArray(w, a)
		}}
	}
	r.store(it, track, enc)
}

// loadArray reads an input's .npy array. Its header is read first and checked against
// the file's size, by the rule the image decoders follow: a header that claims more data
// than the file holds, or a file far larger than its elements could need
// (stages.MaxFileBytes), is refused before anything is allocated for the data; then the
// memory budget is charged from the header (twice the data's bytes: the raw bytes and
// the decoded floats) before the data is read.
func (r *Runner) loadArray(in Input) (*npy.Array, func(), error) {
	var (
		rd   io.Reader
		size int64
	)
	switch {
	case in.Image != nil:
		return nil, nil, errors.New("input is an image; load reads .npy files")
	case in.Data != nil:
		rd, size = bytes.NewReader(in.Data), int64(len(in.Data))
	case in.Open != nil:
		rc, n, err := in.Open(r.ctx)
		if err != nil {
			return nil, nil, pathless(err)
		}
		defer rc.Close()
		rd, size = rc, n
	case in.Path == "":
		return nil, nil, errors.New("input has no path, data or image")
	default:
		f, fi, err := openInput(in.Path) // a FIFO must not hang the worker
		if err != nil {
			return nil, nil, err
		}
		defer f.Close()
		rd, size = f, fi.Size()
	}
	t0 := time.Now()
	br := bufio.NewReader(io.LimitReader(rd, size))
	h, n, off, err := npy.ReadHeader(br, r.plan.Load.MaxElements)
	if err == nil {
		err = checkArraySize(h, n, off, size)
	}
	if err != nil {
		return nil, nil, err
	}
	release, err := r.mem.acquire(r.ctx, 2*4*n)
	if err != nil {
		return nil, nil, err
	}
	a, err := npy.ReadData(br, h, n)
	since(&r.phases.read, t0)
	if err != nil {
		release()
		return nil, nil, err
	}
	return a, release, nil
}

// checkArraySize refuses a .npy file of size bytes whose header (h, n elements, data at
// off) claims more data than the file holds, or that is far larger than that data.
func checkArraySize(h npy.Header, n, off, size int64) error {
	data := 4 * n
	switch {
	case off+data > size:
		return fmt.Errorf("npy: data of shape %v (%d bytes): %w: the file holds %d; refused before reading", h.Shape, data, io.ErrUnexpectedEOF, max(size-off, 0))
	case size > stages.MaxFileBytes(n):
		return fmt.Errorf("%w: file is %d bytes, far more than %d elements can take (at most %d); refused unread", stages.ErrFileTooLarge, size, n, stages.MaxFileBytes(n))
	}
	return nil
}

// ReportFloat is a float32 in the report. A finite value is a JSON number with the fewest
// digits that read back to the same float32 (strconv's shortest form); NaN, +Inf and -Inf,
// which JSON numbers cannot hold, are the strings "NaN", "Infinity" and "-Infinity"
// (JavaScript's and Python's names).
type ReportFloat float32

// MarshalJSON writes f as described on ReportFloat.
func (f ReportFloat) MarshalJSON() ([]byte, error) {
	v := float64(f)
	switch {
	case math.IsNaN(v):
		return []byte(`"NaN"`), nil
	case math.IsInf(v, 1):
		return []byte(`"Infinity"`), nil
	case math.IsInf(v, -1):
		return []byte(`"-Infinity"`), nil
	}
	return strconv.AppendFloat(nil, v, 'g', -1, 32), nil
}

// UnmarshalJSON reads what MarshalJSON writes.
func (f *ReportFloat) UnmarshalJSON(b []byte) error {
	switch string(b) {
	case `"NaN"`:
		*f = ReportFloat(math.NaN())
		return nil
	case `"Infinity"`:
		*f = ReportFloat(math.Inf(1))
		return nil
	case `"-Infinity"`:
		*f = ReportFloat(math.Inf(-1))
		return nil
	}
	v, err := strconv.ParseFloat(string(b), 32)
	if err != nil {
		return fmt.Errorf("report value %s: want a float32 number, \"NaN\", \"Infinity\" or \"-Infinity\"", b)
	}
	*f = ReportFloat(v)
	return nil
}

// shape is the array shape of a line read back; nil for an image's.
func (l *ReportLine) shape() []int {
	if l.Shape == nil {
		return nil
	}
	return append([]int{}, *l.Shape...)
}

// reductions are the reductions of a line read back, by stage name in sorted order.
func (l *ReportLine) reductions() []Reduction {
	if len(l.Reductions) == 0 {
		return nil
	}
	out := make([]Reduction, 0, len(l.Reductions))
	for name, v := range l.Reductions {
		out = append(out, Reduction{Stage: name, Value: float32(v)})
	}
	slices.SortFunc(out, func(a, b Reduction) int { return strings.Compare(a.Stage, b.Stage) })
	return out
}

// InputExts are the file extensions a folder walk takes for the plan's source when no
// others are asked for: "npy" for an array chain, nil (DefaultExts) for images.
func (p *Plan) InputExts() []string {
	if p.Load != nil {
		return []string{npyFormat}
	}
	return nil
}
