package pipeline

import (
	"fmt"
	"io"
	"regexp"
	"sort"

	"github.com/imgpipe/imgpipe/cudastage/sched"
	"github.com/imgpipe/imgpipe/stages"
	"github.com/imgpipe/imgpipe/stages/npy"
)

// Kind says where a stage sits in a chain and what it consumes and produces.
type Kind int

const (
	// SourceKind stages turn an input (encoded bytes) into pixels. A chain starts with one.
	SourceKind Kind = iota
	// PixelKind stages map an image to an image; they may attach a histogram to the item.
	// A run of consecutive pixel stages is what a device planner may move to a GPU.
	PixelKind
	// SinkKind stages consume the final image, e.g. by encoding it into a file. A chain
	// ends with at most one.
	SinkKind
	// ArrayKind stages map a float32 array (from a source stage with NewLoader) to an
	// array, in place, or reduce it to one value for the report (StageDef.Reduces).
	ArrayKind
)

// String returns the kind's name as `imgpipe stages` prints it.
func (k Kind) String() string {
	switch k {
	case SourceKind:
		return "source"
	case PixelKind:
		return "pixel"
	case SinkKind:
		return "sink"
	case ArrayKind:
		return "array"
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// ShapeFunc declares a pixel stage's output shape for an input shape, so that buffers can be
// sized before any pixel is computed (a device planner sizes its slots with it).
// passThrough reports that, for this input, the stage leaves the image as it is: it only
// observes it (histogram) or is the identity (grayscale on a gray image). The CPU runner then
// gives the stage no destination and passes the input on.
type ShapeFunc func(in stages.Shape, p Params) (out stages.Shape, passThrough bool)

// CPUFunc runs a bound pixel stage on the CPU. dst has the shape the stage's ShapeFunc
// declared for src, or is nil when it declared a pass-through. hist is non-nil only for
// stages that attach a histogram. It runs on one goroutine: the engine parallelises across
// images. A device without the stage's kernel (the fake device of tests) runs it too.
type CPUFunc = sched.CPUFunc

// Decoder is a bound source stage: it turns a file's bytes into an RGB image.
type Decoder struct {
	// MaxPixels is the pixel limit checked before anything is allocated for an image.
	MaxPixels int64
	// Decode decodes data into pixels obtained from alloc, and says how for the report.
	Decode func(data []byte, alloc stages.Alloc) (*stages.Image, Decoded, error)
	// DecodeStream, if set, decodes a file of size bytes from head, its first bytes, and
	// file, which reads the rest at their offsets, without holding the file whole (see
	// stages.DecodeStream); the run uses it for the formats stages.Streamed names when
	// Cost read their header from head, and reads other files whole for Decode.
	DecodeStream func(head []byte, file io.ReaderAt, size int64, alloc stages.Alloc) (*stages.Image, Decoded, error)
	// Scale, if set, is the DCT scale (a denominator, see stages.DecodeOptions.Scale) at
	// which Decode decodes a JPEG of header size w×h: set by the decode stage for a fixed
	// scale, and by Compile (bindDecodeScale) for scale=auto.
	Scale func(w, h int) int
	// AutoScale is decode scale=auto: Compile sets Scale from the resize that follows.
	AutoScale bool
	// Note, if set, is a one-line notice about the decoder that a run gives once, such as
	// decode backend=auto falling back to Go's decoder and how to install libjpeg-turbo.
	Note string
	// Head, if set, looks at the first HeadBytes of a file (fewer for a smaller file)
	// before the rest is read, and returns an error for a file that cannot succeed (not an
	// image, or a header over MaxPixels), so a big hostile file is refused without reading
	// it into memory. A nil error only means "read on".
	Head func(head []byte) error
	// Cost, if set, reads what decoding a file of size bytes will take from its first
	// bytes (HeadBytes of them, or the whole file): its header's size, checked, and the
	// decoder's working set. The run charges the memory budget with it before it reads
	// the file whole. An error for a head shorter than the file only means the header
	// lies further on. nil: only the file's bytes are charged.
	Cost func(head []byte, size int64) (stages.Cost, error)
	// Header, if set, reads a whole file's header (size after orientation, orientation,
	// format) and checks it as Decode would before decoding (pixel limit, size, JPEG scan
	// limit), for a GPU run that may decode the file on the device.
	Header func(data []byte) (stages.Header, error)
	// Backend is the decode stage's backend parameter, which decides where files decode
	// on a GPU run (package pipeline/gpu); "" decodes every file with Decode.
	Backend DecodeBackend
	// CPUJPEG names the CPU's JPEG decoder ("go", "turbo") for the report.
	CPUJPEG string
}

// Decoded says how a Decoder made an input's pixels, for the report.
type Decoded struct {
	// Decoder names the decoder ("go", "turbo"; "" for none worth naming).
	Decoder string
	// Scale is the DCT scale applied ("1/2", "1/4", "1/8"); "" at full size.
	Scale string
}

// HeadBytes is how much of a file Decoder.Head sees: enough for the headers of the
// supported formats, including large JPEG metadata segments, in most files.
const HeadBytes = 256 << 10

// MaxFileBytes is the largest input file the engine reads for this decoder: the largest a
// file of MaxPixels can be (stages.MaxFileBytes); anything bigger is refused before it
// is read into memory.
func (d *Decoder) MaxFileBytes() int64 { return stages.MaxFileBytes(d.MaxPixels) }

// Encoder is a bound sink stage: it encodes the final image into a file format.
type Encoder struct {
	// Ext is the file extension of the format, without the dot (e.g. "png").
	Ext string
	// Encode writes m to w.
	Encode func(w io.Writer, m *stages.Image) error
	// Name names the encoding for the report ("png-fast", "png-zlib6", "jpeg").
	Name string
	// DeviceOp, when set, is the encoding op (sched.Op.Encode) that gives Encode's bytes
	// on a device: a GPU run whose device accepts it encodes there (see newGPURun).
	DeviceOp *sched.Op
	// EncodeArray, set for formats that hold float32 arrays (npy), writes an array chain's
	// result; ArrayName names that encoding for the report.
	EncodeArray func(w io.Writer, a *npy.Array) error
	ArrayName   string
	// Options are the save options Encode writes with; a GPU run's device JPEG encoder
	// (jpegEncoderFor) reads the format and quality from them.
	Options stages.SaveOptions
}

// StageDef defines one stage. It is the single source of truth for everything that reads
// a stage: the spec parser, the YAML loader, the planner, `imgpipe stages` and dispatch.
type StageDef struct {
	// Name is how the stage is written in specs and jobs: lower case, [a-z][a-z0-9_]*.
	Name string
	// Kind is the stage's role; it selects which of the implementation fields is set.
	Kind Kind
	// Help is a one-line description.
	Help string
	// Doc is the longer description `imgpipe stages NAME` prints.
	Doc string
	// Params are the stage's typed parameters, in the order they are documented.
	Params []ParamSpec
	// Histogram is true for stages that attach a histogram to the item. A chain may hold
	// at most one, since the report has one histogram per input.
	Histogram bool

	// NewDecoder binds the parameters of a SourceKind stage that makes images.
	NewDecoder func(p Params) (*Decoder, error)
	// NewLoader binds the parameters of a SourceKind stage that makes float32 arrays; a
	// source stage has exactly one of NewDecoder and NewLoader, which decides whether its
	// chain holds pixel stages or array stages.
	NewLoader func(p Params) (*Loader, error)

	// Array binds an ArrayKind stage's parameters into its CPU implementation.
	Array func(p Params) (ArrayFunc, error)
	// Reduces is true for an array stage whose value goes to the report under the stage's
	// name (sum, min, max); the array passes through unchanged.
	Reduces bool

	// Shape declares a PixelKind stage's output shape.
	Shape ShapeFunc
	// Limit, when set, refuses an input shape that the stage would take too long or too
	// much memory over (a resize that changes the aspect ratio beyond reason). It is
	// checked for each image from its header, before the image is decoded.
	Limit func(in stages.Shape, p Params) error
	// CPU binds a PixelKind stage's parameters into its CPU implementation. Binding happens
	// once per run, so per-run work (blur taps, ...) is not repeated per image. It is nil
	// only for a GPU-only stage.
	CPU func(p Params) (CPUFunc, error)
	// GPUOnly, when set, says why the stage has no CPU implementation (a user's kernel has
	// no CPU reference): the stage needs GPU, and a plan holding it refuses to run on the
	// CPU with this reason.
	GPUOnly string
	// GPU, when set, says the stage has a GPU kernel that gives the CPU implementation's
	// exact bits, and binds the stage's parameters into the kernel's launch arguments, a
	// value of the stage's own type (sched.LaunchArgs; nil for a kernel that takes none:
	// use NoLaunchArgs). The launcher registered under the stage's name in package
	// cudastage reads them (for an ArrayKind stage, its array launcher). A chain whose
	// pixel stages, or whose array stages, all have it runs as one device segment on a GPU.
	GPU func(p Params) (args sched.LaunchArgs, err error)
	// ArrayGPU, when set on a GPU-only pixel stage (kernel), lets the stage stand in an
	// array chain too, as a GPU-only array stage: it binds the parameters into the launch
	// arguments of the stage's array launcher.
	ArrayGPU func(p Params) (args sched.LaunchArgs, err error)

	// NewEncoder binds a SinkKind stage's parameters.
	NewEncoder func(p Params) (*Encoder, error)
}

// NoLaunchArgs is StageDef.GPU for a stage whose kernel takes no launch arguments.
func NoLaunchArgs(Params) (sched.LaunchArgs, error) { return nil, nil }

// Param returns the spec of the parameter called name, or nil.
func (d *StageDef) Param(name string) *ParamSpec {
	for i := range d.Params {
		if d.Params[i].Name == name {
			return &d.Params[i]
		}
	}
	return nil
}

var namePattern = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)

// check reports whether the definition is complete and consistent.
func (d *StageDef) check() error {
	if !namePattern.MatchString(d.Name) {
		return fmt.Errorf("stage name %q must match %s", d.Name, namePattern)
	}
	if d.Help == "" {
		return fmt.Errorf("stage %s: no help", d.Name)
	}
	switch d.Kind {
	case SourceKind:
		if (d.NewDecoder == nil) == (d.NewLoader == nil) {
			return fmt.Errorf("stage %s: source stage needs exactly one of NewDecoder and NewLoader", d.Name)
		}
	case ArrayKind:
		if d.Array == nil {
			return fmt.Errorf("stage %s: array stage without Array", d.Name)
		}
	case PixelKind:
		if d.Shape == nil || (d.CPU == nil) == (d.GPUOnly == "") || (d.GPUOnly != "" && d.GPU == nil) {
			return fmt.Errorf("stage %s: pixel stage needs Shape and either CPU or GPUOnly with GPU", d.Name)
		}
	case SinkKind:
		if d.NewEncoder == nil {
			return fmt.Errorf("stage %s: sink stage without NewEncoder", d.Name)
		}
	default:
		return fmt.Errorf("stage %s: unknown kind %d", d.Name, int(d.Kind))
	}
	if d.GPU != nil && d.Kind != PixelKind && d.Kind != ArrayKind {
		return fmt.Errorf("stage %s: only pixel and array stages have a GPU implementation", d.Name)
	}
	if d.ArrayGPU != nil && (d.Kind != PixelKind || d.GPUOnly == "") {
		return fmt.Errorf("stage %s: only a GPU-only pixel stage takes arrays too", d.Name)
	}
	if d.Histogram && d.Kind != PixelKind {
		return fmt.Errorf("stage %s: only pixel stages attach a histogram", d.Name)
	}
	if d.Reduces && d.Kind != ArrayKind {
		return fmt.Errorf("stage %s: only array stages reduce", d.Name)
	}
	seen := map[string]bool{}
	for i := range d.Params {
		ps := &d.Params[i]
		if seen[ps.Name] {
			return fmt.Errorf("stage %s: parameter %s defined twice", d.Name, ps.Name)
		}
		seen[ps.Name] = true
		if err := ps.check(); err != nil {
			return fmt.Errorf("stage %s: %w", d.Name, err)
		}
	}
	for _, ps := range d.Params {
		for _, c := range ps.AppliesIf {
			if on := d.Param(c.Param); on == nil || on == d.Param(ps.Name) || len(c.Values) == 0 {
				return fmt.Errorf("stage %s: parameter %s applies if %s, which is not another parameter with values", d.Name, ps.Name, c.Param)
			}
		}
	}
	return nil
}

// Registry holds stage definitions by name. The zero value is empty and ready to use; most
// callers use Builtin.
type Registry struct {
	byName map[string]*StageDef
}

// NewRegistry returns a registry holding defs, or an error naming the first bad definition.
func NewRegistry(defs ...*StageDef) (*Registry, error) {
	r := &Registry{}
	for _, d := range defs {
		if err := r.Register(d); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// Register adds a stage definition. It refuses incomplete definitions and duplicate names.
// A registry is not safe for concurrent use while it changes: register from init, as the
// builtin stage files and package kernelstage do, or before the registry is shared.
func (r *Registry) Register(d *StageDef) error {
	if err := d.check(); err != nil {
		return err
	}
	if r.byName == nil {
		r.byName = map[string]*StageDef{}
	}
	if _, dup := r.byName[d.Name]; dup {
		return fmt.Errorf("stage %s registered twice", d.Name)
	}
	r.byName[d.Name] = d
	return nil
}

// Lookup returns the definition of the stage called name.
func (r *Registry) Lookup(name string) (*StageDef, bool) {
	d, ok := r.byName[name]
	return d, ok
}

// Stages returns every definition: sources first, then pixel stages, then sinks, each
// group sorted by name, which is the order `imgpipe stages` lists them in.
func (r *Registry) Stages() []*StageDef {
	out := make([]*StageDef, 0, len(r.byName))
	for _, d := range r.byName {
		out = append(out, d)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Kind != out[j].Kind {
			return out[i].Kind < out[j].Kind
		}
		return out[i].Name < out[j].Name
	})
	return out
}

// names returns every stage name, for suggestions.
func (r *Registry) names() []string {
	out := make([]string, 0, len(r.byName))
	for n := range r.byName {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}
