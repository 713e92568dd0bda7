package cudastage

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"sync"

	"github.com/imgpipe/imgpipe/cudastage/cu"
	"github.com/imgpipe/imgpipe/cudastage/sched"
	"github.com/imgpipe/imgpipe/kernels"
)

// Constants every kernel shares, identical to the IMGPIPE_* macros of
// kernels/common.cuh (TestKernelConstants reads them from the sources; each
// op file mirrors its own kernel's constants the same way).
const (
	kThreads    = 256 // threads per block, every kernel
	kGrayPixels = 16  // pixels per thread, grayscale and histogram
	kImgBytes   = 48  // one launch-table entry (struct Img)
)

// A launcher is the GPU implementation of one pixel stage: the kernels of
// kernels/<stage>.cu and how a batch maps onto their launches. Each
// op_<stage>.go file registers one under the stage's registry name; nothing
// else in this package knows a stage.
type launcher struct {
	// passes are the stage's kernel launches, in order. The first reads the
	// batch's source, the last writes its destination; intermediates go
	// through the scratch buffer.
	passes []pass
	// scratch is the launcher's scratch memory; nil when it needs none.
	scratch *scratchSpec
	// encode is the format the launcher encodes (sched.EncodeOp.Format) when
	// its stage's op is a segment's encoder; "" for a pixel stage.
	encode string
	// check validates the op's Args; nil when the stage takes none.
	check func(args sched.LaunchArgs) error
	// params returns the kernel parameters that follow (table, n, src, dst),
	// bound from the op's Args; nil when there are none.
	params func(args sched.LaunchArgs) []any
	// prepare and run, when set, replace passes for a stage whose kernels
	// are not in imgpipe's fatbin (a user kernel): prepare compiles and loads
	// them into the current context for device dev, before any input is
	// touched (Device.CheckOp); run queues them on s, without a launch
	// table.
	prepare func(k *Kernels, dev cu.Device, args sched.LaunchArgs) error
	run     func(k *Kernels, s cu.Stream, b *Batch, buf Buffers) error
	// extra is the bytes of per-image data (a geometry the kernel cannot
	// derive from the source's shape alone) that follow the launch table's
	// entries, one record per image in entry order; encodeExtra writes one
	// record for an image src → dst. 0 and nil when the stage needs none.
	extra       int
	encodeExtra func(args sched.LaunchArgs, src, dst BatchImage, out []byte)
}

// pass is one kernel launch of a stage.
type pass struct {
	kernel   string // the function's name in the module
	src, dst bufRole
	// extra are buffers passed after src and dst (an encoder's scratch and
	// file lengths), for kernels that need more than two.
	extra []bufRole
	// tiles returns the blocks the kernel spends on a w×h×c source image and
	// its entry's tiles_x (see the kernel's comment in its .cu file).
	tiles func(w, h, c int64) (blocks, tilesX int64)
	// units, when set, counts per-image records a kernel keeps in scratch
	// (the encoder's blocks): each entry's reserved field is then the sum of
	// units over the earlier images, the index of the image's first record.
	units func(w, h, c int64) int64
	// smem is the dynamic shared memory of a launch, from the op's Args; nil
	// for none.
	smem func(args sched.LaunchArgs) uint32
	// byDst makes tiles count over the destination image's shape instead of
	// the source's (for stages whose output may be larger than their input).
	byDst bool
}

// bufRole names which of a launch's buffers a pass reads or writes.
type bufRole int

const (
	roleSrc bufRole = iota
	roleDst
	roleScratch
	roleLens // an encoder's file lengths (sched.OpCall.Lens)
)

// scratchSpec is a launcher's scratch memory.
type scratchSpec struct {
	// layout returns where passes with the scratch role find each image
	// (nil when the kernels place their records themselves) and the bytes
	// the batch needs.
	layout func(src []BatchImage) ([]BatchImage, uint64)
	// max bounds layout's size over n images of srcBytes pixel bytes in all.
	max func(srcBytes uint64, n int) uint64
	// align is the alignment the scratch pointer needs (0: none).
	align uint64
}

// launch is a pass planned over one batch.
type launch struct {
	pass
	entries []entry
	blocks  int    // grid size: the sum of the images' tiles
	shared  uint32 // dynamic shared memory bytes
}

// entry mirrors struct Img of kernels/common.cuh.
type entry struct {
	srcOff, dstOff          uint64
	w, h, c                 int32
	srcStride, dstStride    int32
	block0, tilesX, reserve int32
}

// launchers are the registered GPU implementations, by stage name.
var launchers = map[string]*launcher{}

// register adds the launcher of the stage called name; op files call it from
// init.
func register(name string, l *launcher) {
	if _, dup := launchers[name]; dup || (len(l.passes) == 0) == (l.run == nil) || (l.run == nil) != (l.prepare == nil) {
		panic("cudastage: launcher for " + name + " registered twice, or not with either passes or prepare and run")
	}
	launchers[name] = l
}

// LaunchedStages returns the names of the stages that have a registered
// launcher, sorted: pixel stages (encoders left out: their ops are a save
// stage's, made by the planner, not bound by a stage's GPU binder) and array
// stages, so that a test outside this package can check them against the
// stage registry, both ways.
func LaunchedStages() (pixel, array []string) {
	for name, l := range launchers {
		if l.encode == "" {
			pixel = append(pixel, name)
		}
	}
	return slices.Sorted(slices.Values(pixel)), slices.Sorted(maps.Keys(arrayLaunchers))
}

// launcherFor returns op's launcher after checking op's arguments, and that
// an encoding op (op.Encode) goes to a launcher of its format and only there.
func launcherFor(op sched.Op) (*launcher, error) {
	l := launchers[op.Name]
	switch {
	case l == nil:
		return nil, fmt.Errorf("stage %q has no GPU kernel", op.Name)
	case l.encode != "" && op.Encode == nil:
		return nil, fmt.Errorf("%s: the GPU %s kernels encode files, but the op has no encoding", op, op.Name)
	case l.encode != "" && op.Encode.Format != l.encode:
		return nil, fmt.Errorf("%s: format %q has no GPU encoder (the GPU encodes %s)", op, op.Encode.Format, l.encode)
	case l.encode != "" && (op.Encode.Bound == nil || op.Hist):
		return nil, fmt.Errorf("%s: an encoding op needs a Bound and cannot be a histogram", op)
	case l.encode == "" && op.Encode != nil:
		return nil, fmt.Errorf("%s: stage %s has no GPU encoder", op, op.Name)
	}
	if err := checkLaunchArgs(op, l.check); err != nil {
		return nil, err
	}
	return l, nil
}

// checkLaunchArgs checks op's launch arguments with check, or that it has none when
// check is nil.
func checkLaunchArgs(op sched.Op, check func(sched.LaunchArgs) error) error {
	if check == nil {
		if op.Args != nil {
			return fmt.Errorf("%s: takes no launch arguments, got %T", op, op.Args)
		}
		return nil
	}
	if err := check(op.Args); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	return nil
}

// argsOf returns launch arguments as T, the type of the stage's own
// (sched.LaunchArgs), or an error naming what came instead. A launcher's check
// starts with it, so that its other functions may take the type as given
// (typed).
func argsOf[T sched.LaunchArgs](args sched.LaunchArgs) (T, error) {
	v, ok := args.(T)
	if !ok {
		return v, fmt.Errorf("launch arguments are %T, want %T", args, v)
	}
	return v, nil
}

// checked is a launcher's check for arguments of type T: argsOf, then valid
// (nil: any value of T will do).
func checked[T sched.LaunchArgs](valid func(T) error) func(sched.LaunchArgs) error {
	return func(args sched.LaunchArgs) error {
		v, err := argsOf[T](args)
		if err == nil && valid != nil {
			err = valid(v)
		}
		return err
	}
}

// typed adapts f, which reads launch arguments of type T, to a launcher's
// field; the launcher's check (checked) has made sure of the type before any
// such field runs.
func typed[T sched.LaunchArgs, R any](f func(T) R) func(sched.LaunchArgs) R {
	return func(args sched.LaunchArgs) R { return f(args.(T)) }
}

// plan returns the launches of l's passes over the batch, before their images
// are added.
func (l *launcher) plan(args sched.LaunchArgs) []launch {
	out := make([]launch, len(l.passes))
	for i, p := range l.passes {
		out[i].pass = p
		if p.smem != nil {
			out[i].shared = p.smem(args)
		}
	}
	return out
}

// add appends the entries for images src → dst, giving each its blocks.
func (p *launch) add(src, dst []BatchImage) {
	p.entries = make([]entry, len(src))
	var units int64
	for i, s := range src {
		w, h, c := int64(s.W), int64(s.H), int64(s.C)
		t := s
		if p.byDst {
			t = dst[i]
		}
		blocks, tx := p.tiles(int64(t.W), int64(t.H), int64(t.C))
		p.entries[i] = entry{
			srcOff: s.Off, dstOff: dst[i].Off,
			w: int32(s.W), h: int32(s.H), c: int32(s.C),
			srcStride: int32(s.Stride), dstStride: int32(dst[i].Stride),
			block0: int32(min(p.blocks, math.MaxInt32)), tilesX: int32(tx),
			reserve: int32(min(units, math.MaxInt32)),
		}
		p.blocks += int(blocks)
		if p.units != nil {
			units += p.units(w, h, c)
		}
	}
}

// direct is the single pass of a stage whose one kernel reads the source and
// writes the destination.
func direct(kernel string, tiles func(w, h, c int64) (blocks, tilesX int64)) []pass {
	return []pass{{kernel: kernel, src: roleSrc, dst: roleDst, tiles: tiles}}
}

// ceilDiv is ⌈a/b⌉ for positive b.
func ceilDiv(a, b int64) int64 { return (a + b - 1) / b }

// TableBytes is the size of the launch tables of op over n images, which
// EncodeTable writes and Run reads from device memory: each pass's entries,
// then the per-image extra records (0 for a stage without a launcher, which
// the executor refuses anyway).
func TableBytes(op sched.Op, n int) int {
	if op.Array {
		if l := arrayLaunchers[op.Name]; l != nil {
			return n * l.record
		}
		return 0
	}
	if l := launchers[op.Name]; l != nil {
		return len(l.passes)*n*kImgBytes + n*l.extra
	}
	return 0
}

// MaxScratchBytes bounds Batch.ScratchBytes for op over n images whose pixels
// take srcBytes in all, for callers that size one scratch buffer per stream.
func MaxScratchBytes(op sched.Op, srcBytes uint64, n int) uint64 {
	if op.Array {
		if l := arrayLaunchers[op.Name]; l != nil && l.scratch != nil {
			return l.scratch(int64(srcBytes / sched.ElemBytes))
		}
		return 0
	}
	if l := launchers[op.Name]; l != nil && l.scratch != nil {
		return l.scratch.max(srcBytes, n)
	}
	return 0
}

// Kernels are the batched kernels loaded into one CUDA context. Load them
// once per context (loading costs milliseconds) and keep them as long as the
// context; every method must be called with that context current (inside
// GPU.Do or a goroutine bound with GPU.Bind). A Kernels value is safe for
// concurrent use on different streams.
type Kernels struct {
	mod cu.Module
	fn  map[string]cu.Function

	// user holds the modules and functions of user kernels (op_kernel.go),
	// loaded by a launcher's prepare, by the op's Args.
	mu   sync.Mutex
	user map[any]userFunc
}

// LoadKernels loads the kernels (kernels.Image: the embedded fatbin, or the
// file IMGPIPE_FATBIN names) into the current
// context.
func LoadKernels() (*Kernels, error) {
	image, err := kernels.Image()
	if err != nil {
		return nil, err
	}
	return NewKernels(image)
}

// NewKernels loads kernels from a module image (a fatbin, cubin or PTX that
// defines the kernel of every registered launcher, and the decoder's
// orientation kernel) into the current context.
func NewKernels(image []byte) (*Kernels, error) {
	mod, err := cu.ModuleLoadData(image)
	if err != nil {
		return nil, fmt.Errorf("loading the imgpipe kernels: %w", err)
	}
	names := append([]string{orientKernel}, jpegKernels...)
	for _, l := range launchers {
		for _, p := range l.passes {
			names = append(names, p.kernel)
		}
	}
	for _, l := range arrayLaunchers {
		names = append(names, l.kernels...)
	}
	k := &Kernels{mod: mod, fn: map[string]cu.Function{}, user: map[any]userFunc{}}
	for _, name := range names {
		if k.fn[name], err = mod.Function(name); err != nil {
			mod.Unload()
			return nil, fmt.Errorf("loading the imgpipe kernels: %w", err)
		}
	}
	return k, nil
}

// Unload unloads the module and the user kernels' modules; work already
// queued that uses them must be finished.
func (k *Kernels) Unload() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	var errs []error
	for key, u := range k.user {
		errs = append(errs, u.mod.Unload())
		delete(k.user, key)
	}
	return errors.Join(append(errs, k.mod.Unload())...)
}

// Run queues the batch's kernels on stream s: for a histogram op first a
// memset of its counts, then one launch per pass of the op's launcher. It
// returns once the work is queued; errors found at queue time come back
// here, errors during execution at the next synchronisation (a *cu.Error,
// sticky for a fault). An empty batch queues nothing.
func (k *Kernels) Run(s cu.Stream, b *Batch, buf Buffers) error {
	if b.Op.Array {
		return k.runArrays(s, b, buf)
	}
	launches, err := b.plan()
	if l := launchers[b.Op.Name]; err == nil && l.run != nil && len(b.Src) > 0 {
		return l.run(k, s, b, buf)
	}
	if err != nil || len(launches) == 0 {
		return err
	}
	name := b.Op.String()
	if err := buf.check(b, name); err != nil {
		return err
	}
	if b.Op.Hist {
		for _, r := range mergeRanges(b.dstRanges()) {
			if err := cu.MemsetD8Async(buf.Dst+cu.DevicePtr(r.lo), 0, r.hi-r.lo, s); err != nil {
				return fmt.Errorf("%s: zeroing the counts: %w", name, err)
			}
		}
	}
	var extra []any
	if l := launchers[b.Op.Name]; l.params != nil {
		extra = l.params(b.Op.Args)
	}
	n := int32(len(b.Src))
	table := buf.Table
	roles := [...]cu.DevicePtr{roleSrc: buf.Src, roleDst: buf.Dst, roleScratch: buf.Scratch, roleLens: buf.Lens}
	for _, p := range launches {
		args := []any{&table, &n, &roles[p.src], &roles[p.dst]}
		for _, r := range p.extra {
			args = append(args, &roles[r])
		}
		args = append(args, extra...)
		if p.blocks > math.MaxUint32 {
			return fmt.Errorf("%s: %s: grid of %d blocks", name, p.kernel, p.blocks)
		}
		fn, ok := k.fn[p.kernel]
		if !ok {
			return fmt.Errorf("%s: kernel %s is not loaded", name, p.kernel)
		}
		grid, block := [3]uint32{uint32(p.blocks), 1, 1}, [3]uint32{kThreads, 1, 1}
		if err := cu.LaunchKernel(fn, grid, block, p.shared, s, args...); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		table += cu.DevicePtr(len(p.entries) * kImgBytes)
	}
	return nil
}
