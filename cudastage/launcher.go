package cudastage

import (
	"errors"
	"fmt"
	"math"
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
	// scratch is set when the passes keep a uint16 per sample in scratch
	// memory (see Batch.ScratchLayout).
	scratch bool
	// check validates the op's Args; nil when the stage takes none.
	check func(args any) error
	// params returns the kernel parameters that follow (table, n, src, dst),
	// bound from the op's Args; nil when there are none.
	params func(args any) []any
	// prepare and run, when set, replace passes for a stage whose kernels
	// are not in imgpipe's fatbin (a user kernel): prepare compiles and loads
	// them into the current context for device dev, before any input is
	// touched (Device.CheckOp); run queues them on s, without a launch
	// table.
	prepare func(k *Kernels, dev cu.Device, args any) error
	run     func(k *Kernels, s cu.Stream, b *Batch, buf Buffers) error
}

// pass is one kernel launch of a stage.
type pass struct {
	kernel   string // the function's name in the module
	src, dst bufRole
	// tiles returns the blocks the kernel spends on a w×h×c source image and
	// its entry's tiles_x (see the kernel's comment in its .cu file).
	tiles func(w, h, c int64) (blocks, tilesX int64)
	// smem is the dynamic shared memory of a launch, from the op's Args; nil
	// for none.
	smem func(args any) uint32
}

// bufRole names which of a launch's buffers a pass reads or writes.
type bufRole int

const (
	roleSrc bufRole = iota
	roleDst
	roleScratch
)

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

// launcherFor returns op's launcher after checking op's arguments.
func launcherFor(op sched.Op) (*launcher, error) {
	l := launchers[op.Name]
	switch {
	case l == nil:
		return nil, fmt.Errorf("stage %q has no GPU kernel", op.Name)
	case l.check != nil:
		if err := l.check(op.Args); err != nil {
			return nil, fmt.Errorf("%s: %w", op, err)
		}
	case op.Args != nil:
		return nil, fmt.Errorf("%s: takes no launch arguments, got %T", op, op.Args)
	}
	return l, nil
}

// plan returns the launches of l's passes over the batch, before their images
// are added.
func (l *launcher) plan(args any) []launch {
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
	for i, s := range src {
		blocks, tx := p.tiles(int64(s.W), int64(s.H), int64(s.C))
		p.entries[i] = entry{
			srcOff: s.Off, dstOff: dst[i].Off,
			w: int32(s.W), h: int32(s.H), c: int32(s.C),
			srcStride: int32(s.Stride), dstStride: int32(dst[i].Stride),
			block0: int32(min(p.blocks, math.MaxInt32)), tilesX: int32(tx),
		}
		p.blocks += int(blocks)
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
// EncodeTable writes and Run reads from device memory (0 for a stage without
// a launcher, which the executor refuses anyway).
func TableBytes(op sched.Op, n int) int {
	if l := launchers[op.Name]; l != nil {
		return len(l.passes) * n * kImgBytes
	}
	return 0
}

// MaxScratchBytes bounds Batch.ScratchBytes for op over n images whose pixels
// take srcBytes in all, for callers that size one scratch buffer per stream.
func MaxScratchBytes(op sched.Op, srcBytes uint64, n int) uint64 {
	if l := launchers[op.Name]; l == nil || !l.scratch {
		return 0
	}
	return 2*srcBytes + ScratchAlign*uint64(n)
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
// defines the kernel of every registered launcher) into the current context.
func NewKernels(image []byte) (*Kernels, error) {
	mod, err := cu.ModuleLoadData(image)
	if err != nil {
		return nil, fmt.Errorf("loading the imgpipe kernels: %w", err)
	}
	k := &Kernels{mod: mod, fn: map[string]cu.Function{}, user: map[any]userFunc{}}
	for _, l := range launchers {
		for _, p := range l.passes {
			if k.fn[p.kernel], err = mod.Function(p.kernel); err != nil {
				mod.Unload()
				return nil, fmt.Errorf("loading the imgpipe kernels: %w", err)
			}
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
	roles := [...]cu.DevicePtr{roleSrc: buf.Src, roleDst: buf.Dst, roleScratch: buf.Scratch}
	for _, p := range launches {
		args := append([]any{&table, &n, &roles[p.src], &roles[p.dst]}, extra...)
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
