package cudastage

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/imgpipe/imgpipe/cudastage/cu"
	"github.com/imgpipe/imgpipe/cudastage/sched"
	"github.com/imgpipe/imgpipe/stages/array"
)

// The float32 array stages on the GPU (sched.Op.Array): kernels/array.cu for
// the built-in ones, and a user's kernel with the array calling convention
// (op_kernel.go). An array travels as sched.ArrayShape: a Batch's BatchImage
// is one row of W elements of 4 bytes, with its axes in Batch.Dims.
//
// Arrays are launched one at a time, not through a launch table: a batch
// holds few arrays and each is large, so a launch per array costs nothing
// that a table would save, and a reduction's tree, whose depth depends on the
// array's length, stays plain host code (reduceLevels) that a CPU test checks
// against stages/array.Sum.

// kNaNBits is IMGPIPE_NAN_BITS: the bits of every NaN the array kernels
// write (stages/array.NaN).
const kNaNBits = 2143289344

// arrayLauncher is the GPU implementation of one array stage.
type arrayLauncher struct {
	// kernels are the fatbin functions run launches; none for a user kernel,
	// which prepare compiles and loads (as launcher.prepare does).
	kernels []string
	prepare func(k *Kernels, dev cu.Device, args sched.LaunchArgs) error
	// check validates the op's Args; nil when the stage takes none.
	check func(args sched.LaunchArgs) error
	// reduces says the op writes one float32 per array (sched.Op.Reduce).
	reduces bool
	// scratch is the device scratch a stream needs for arrays of at most n
	// elements; nil for none.
	scratch func(n int64) uint64
	// record is the bytes of launch table per array, which encode writes
	// from the array's placement (its axes); 0 for none.
	record int
	encode func(dims []int, out []byte)
	// run queues the op over array i of b on s.
	run func(k *Kernels, s cu.Stream, b *Batch, i int, buf Buffers) error
}

// arrayLaunchers are the registered array stages' implementations, by stage
// name.
var arrayLaunchers = map[string]*arrayLauncher{}

// registerArray adds the array launcher of the stage called name.
func registerArray(name string, l *arrayLauncher) {
	if _, dup := arrayLaunchers[name]; dup || l.run == nil || (len(l.kernels) == 0) == (l.prepare == nil) {
		panic("cudastage: array launcher for " + name + " registered twice, or without run and either kernels or prepare")
	}
	arrayLaunchers[name] = l
}

func init() {
	registerArray("scale", &arrayLauncher{kernels: []string{"imgpipe_array_scale"}, check: checked[array.ScaleArgs](nil),
		run: elementwise("imgpipe_array_scale", typed(func(a array.ScaleArgs) float32 { return a.Factor }))})
	registerArray("add", &arrayLauncher{kernels: []string{"imgpipe_array_add"}, check: checked[array.AddArgs](nil),
		run: elementwise("imgpipe_array_add", typed(func(a array.AddArgs) float32 { return a.Value }))})
	for _, name := range []string{"sum", "min", "max"} {
		kernel := "imgpipe_array_" + name
		registerArray(name, &arrayLauncher{kernels: []string{kernel}, reduces: true, scratch: reduceScratch, run: reduce(kernel)})
	}
}

// arrayLauncherFor returns op's array launcher after checking its arguments.
func arrayLauncherFor(op sched.Op) (*arrayLauncher, error) {
	l := arrayLaunchers[op.Name]
	switch {
	case l == nil:
		return nil, fmt.Errorf("array stage %q has no GPU kernel", op.Name)
	case l.reduces != (op.Reduce != nil):
		return nil, fmt.Errorf("%s: the GPU kernel reduces %v, the op %v", op, l.reduces, op.Reduce != nil)
	}
	if err := checkLaunchArgs(op, l.check); err != nil {
		return nil, err
	}
	return l, nil
}

// elementwise runs kernel(in, out, n, operand) over one array, with the
// float32 operand read from the op's launch arguments.
func elementwise(kernel string, operand func(sched.LaunchArgs) float32) func(k *Kernels, s cu.Stream, b *Batch, i int, buf Buffers) error {
	return func(k *Kernels, s cu.Stream, b *Batch, i int, buf Buffers) error {
		in, out := buf.Src+cu.DevicePtr(b.Src[i].Off), buf.Dst+cu.DevicePtr(b.Dst[i].Off)
		n, v := int64(b.Src[i].W), operand(b.Op.Args)
		return k.launch1D(kernel, n, s, &in, &out, &n, &v)
	}
}

// reduceLevel is one launch of a reduction's tree over an array: it reduces
// count values, read from the array (the first level, whose srcOff is
// unused) or from scratch at srcOff, block by block of kThreads into one value per block, written to
// scratch at dstOff, or, on the last level (a single block), to the array's
// value.
type reduceLevel struct {
	count, blocks  int64
	srcOff, dstOff uint64
}

// last reports whether the level writes the array's value.
func (l reduceLevel) last() bool { return l.blocks == 1 }

// reduceLevels is the tree of stages/array's SumOrder over n ≥ 1 elements:
// each level reduces the previous one's block values, until one remains. The
// levels' outputs alternate between two scratch areas, so that a level never
// writes what it reads.
func reduceLevels(n int64) []reduceLevel {
	half := alignUp(4*uint64(ceilDiv(n, kThreads)), ScratchAlign) // the first area holds the first level's values
	var (
		out  []reduceLevel
		area = [2]uint64{0, half}
	)
	for count, k := n, 0; ; k++ {
		l := reduceLevel{count: count, blocks: ceilDiv(count, kThreads), dstOff: area[k%2]}
		if k > 0 {
			l.srcOff = area[(k-1)%2]
		}
		out = append(out, l)
		if l.last() {
			return out
		}
		count = l.blocks
	}
}

// reduceScratch is the scratch reduceLevels uses for arrays of at most n
// elements: the first level's values, then the second's.
func reduceScratch(n int64) uint64 {
	return alignUp(4*uint64(ceilDiv(n, kThreads)), ScratchAlign) + 4*uint64(ceilDiv(n, kThreads*kThreads))
}

// reduce runs kernel, one level of a reduction, over one array's tree.
func reduce(kernel string) func(k *Kernels, s cu.Stream, b *Batch, i int, buf Buffers) error {
	return func(k *Kernels, s cu.Stream, b *Batch, i int, buf Buffers) error {
		for j, l := range reduceLevels(int64(b.Src[i].W)) {
			in, out := buf.Src+cu.DevicePtr(b.Src[i].Off), buf.Scratch+cu.DevicePtr(l.dstOff)
			if j > 0 {
				in = buf.Scratch + cu.DevicePtr(l.srcOff)
			}
			if l.last() {
				out = buf.Dst + cu.DevicePtr(b.Dst[i].Off)
			}
			n := l.count
			if err := k.launch1D(kernel, n, s, &in, &out, &n); err != nil {
				return err
			}
		}
		return nil
	}
}

// launch1D queues the fatbin kernel over n elements, kThreads per block.
func (k *Kernels) launch1D(kernel string, n int64, s cu.Stream, args ...any) error {
	fn, ok := k.fn[kernel]
	if !ok {
		return fmt.Errorf("kernel %s is not loaded", kernel)
	}
	return cu.LaunchKernel(fn, [3]uint32{uint32(ceilDiv(n, kThreads)), 1, 1}, [3]uint32{kThreads, 1, 1}, 0, s, args...)
}

// checkArrays validates an array op's batch: the op, every array's
// placement and axes, the destinations (an array of the source's length, or
// a reduction's 4-byte value) and that no two overlap.
func (b *Batch) checkArrays() (*arrayLauncher, error) {
	name := b.Op.String()
	l, err := arrayLauncherFor(b.Op)
	if err != nil {
		return nil, err
	}
	n := len(b.Src)
	switch {
	case len(b.Dst) != n || len(b.Dims) != n:
		return nil, fmt.Errorf("%s: %d sources but %d destinations and %d axes", name, n, len(b.Dst), len(b.Dims))
	case n > MaxBatchImages:
		return nil, fmt.Errorf("%s: %d arrays, at most %d", name, n, MaxBatchImages)
	}
	for i, s := range b.Src {
		if err := checkArray(s, b.Dims[i]); err != nil {
			return nil, fmt.Errorf("%s: array %d: %w", name, i, err)
		}
		d := b.Dst[i]
		if l.reduces {
			d = BatchImage{W: 1, H: 1, C: sched.ElemBytes, Off: d.Off, Stride: sched.ElemBytes}
		} else if d.W != s.W || d.H != s.H || d.C != s.C {
			return nil, fmt.Errorf("%s: destination %d is %dx%dx%d, want the source's %dx%dx%d", name, i, d.W, d.H, d.C, s.W, s.H, s.C)
		}
		if d.Off%sched.ElemBytes != 0 || d.Off > math.MaxInt64/2 {
			return nil, fmt.Errorf("%s: destination %d at offset %d, want a multiple of %d", name, i, d.Off, sched.ElemBytes)
		}
	}
	if err := checkDisjoint(b.dstRanges()); err != nil {
		return nil, fmt.Errorf("%s: destinations %w", name, err)
	}
	return l, nil
}

// checkArray reports whether a is a placed array of axes dims:
// sched.ArrayShape of their product, tightly packed, its elements aligned.
func checkArray(a BatchImage, dims []int) error {
	if err := sched.CheckArrayShape(a.shape()); err != nil {
		return err
	}
	n := 1
	for _, d := range dims {
		n *= d
	}
	switch {
	case len(dims) > sched.MaxDims || n != a.W:
		return fmt.Errorf("axes %v do not hold %d elements", dims, a.W)
	case a.Stride != a.W*a.C:
		return fmt.Errorf("stride %d, want %d", a.Stride, a.W*a.C)
	case a.Off%sched.ElemBytes != 0 || a.Off > math.MaxInt64/2:
		return fmt.Errorf("offset %d, want a multiple of %d", a.Off, sched.ElemBytes)
	}
	return nil
}

// runArrays queues an array op over every array of b on s.
func (k *Kernels) runArrays(s cu.Stream, b *Batch, buf Buffers) error {
	l, err := b.checkArrays()
	if err != nil || len(b.Src) == 0 {
		return err
	}
	name := b.Op.String()
	switch {
	case buf.Src == 0 || buf.Dst == 0:
		return fmt.Errorf("%s: source and destination pointers must be set", name)
	case l.scratch != nil && buf.Scratch == 0:
		return fmt.Errorf("%s: needs scratch, none given", name)
	case l.record > 0 && buf.Table == 0:
		return fmt.Errorf("%s: needs a launch table, none given", name)
	}
	for i := range b.Src {
		if err := l.run(k, s, b, i, buf); err != nil {
			return fmt.Errorf("%s: array %d: %w", name, i, err)
		}
	}
	return nil
}

// encodeArrayTable writes the per-array records of b's launch table.
func (b *Batch) encodeArrayTable(dst []byte) error {
	l, err := b.checkArrays()
	if err != nil {
		return err
	}
	if want := l.record * len(b.Src); len(dst) < want {
		return fmt.Errorf("%s: table buffer is %d bytes, need %d", b.Op, len(dst), want)
	}
	for _, dims := range b.Dims {
		if l.record > 0 {
			l.encode(dims, dst[:l.record])
			dst = dst[l.record:]
		}
	}
	return nil
}

// kDimsRecord is a user array kernel's record: its axes as sched.MaxDims
// little-endian int64s, the unused ones 0.
const kDimsRecord = 8 * sched.MaxDims

// encodeDims writes an array's axes as a kDimsRecord.
func encodeDims(dims []int, out []byte) {
	clear(out)
	for i, d := range dims {
		binary.LittleEndian.PutUint64(out[8*i:], uint64(d))
	}
}
