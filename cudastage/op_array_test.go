package cudastage

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/imgpipe/imgpipe/cudastage/sched"
	"github.com/imgpipe/imgpipe/cudastage/userkernel"
	"github.com/imgpipe/imgpipe/stages/array"
)

// levelReduce runs reduceLevels(len(x)) on the CPU as the kernels do: each level's block
// of up to kThreads values reduced with halving strides (the kernel's reduce_level),
// reading and writing a scratch of reduceScratch bytes at the levels' offsets. It fails
// the test when a level reads or writes outside the scratch, or writes what it reads.
func levelReduce(t *testing.T, x []float32, op func(a, b float32) float32) float32 {
	t.Helper()
	scratch := make([]float32, reduceScratch(int64(len(x)))/4)
	var value float32
	for j, l := range reduceLevels(int64(len(x))) {
		in := x
		if j > 0 {
			in = scratch[l.srcOff/4 : l.srcOff/4+uint64(l.count)]
		}
		out := []float32{0}
		if !l.last() {
			if l.dstOff+4*uint64(l.blocks) > uint64(4*len(scratch)) {
				t.Fatalf("n=%d level %d writes [%d, %d) of %d scratch bytes", len(x), j, l.dstOff, l.dstOff+4*uint64(l.blocks), 4*len(scratch))
			}
			if j > 0 && l.dstOff < l.srcOff+4*uint64(l.count) && l.srcOff < l.dstOff+4*uint64(l.blocks) {
				t.Fatalf("n=%d level %d writes what it reads", len(x), j)
			}
			out = scratch[l.dstOff/4 : l.dstOff/4+uint64(l.blocks)]
		}
		if int64(len(in)) != l.count || l.blocks != (l.count+kThreads-1)/kThreads {
			t.Fatalf("n=%d level %d: %d values in %d blocks", len(x), j, l.count, l.blocks)
		}
		for b := range out {
			var s [kThreads]float32
			cnt := copy(s[:], in[b*kThreads:])
			for stride := kThreads / 2; stride > 0; stride /= 2 {
				for i := 0; i < stride && i+stride < cnt; i++ {
					s[i] = op(s[i], s[i+stride])
				}
			}
			out[b] = s[0]
		}
		value = out[0]
	}
	return value
}

// The GPU's reduction levels give stages/array's bits: Sum in SumOrder, and Min and Max,
// whose total order makes any tree give the sequential answer.
func TestReduceLevelsMatchCPU(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	minOp := func(a, b float32) float32 { v, _ := array.Min([]float32{a, b}); return v }
	maxOp := func(a, b float32) float32 { v, _ := array.Max([]float32{a, b}); return v }
	canon := func(v float32) float32 {
		if v != v {
			return array.NaN
		}
		return v
	}
	for _, n := range []int{1, 2, 255, 256, 257, 1000, 65535, 65536, 65537, 256*65536 + 3} {
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(rng.NormFloat64() * 1e3)
		}
		if n > 2 {
			x[n/2] = float32(math.Copysign(0, -1))
		}
		lo, _ := array.Min(x)
		hi, _ := array.Max(x)
		for _, c := range []struct {
			name string
			got  float32
			want float32
		}{
			{"sum", canon(levelReduce(t, x, func(a, b float32) float32 { return a + b })), array.Sum(x)},
			{"min", levelReduce(t, x, minOp), lo},
			{"max", levelReduce(t, x, maxOp), hi},
		} {
			if math.Float32bits(c.got) != math.Float32bits(c.want) {
				t.Errorf("n=%d %s: levels give %v, stages/array %v", n, c.name, c.got, c.want)
			}
		}
	}
	if got := len(reduceLevels(sched.MaxArrayElements)); got != 4 {
		t.Errorf("%d levels for the largest array, want 4", got)
	}
}

// arrayBatch is op over arrays of the given axes, packed at 256-byte boundaries, with
// their outputs (or values) packed the same way.
func arrayBatch(op sched.Op, dims ...[]int) *Batch {
	b := &Batch{Op: op, Dims: dims}
	var off, voff uint64
	for _, d := range dims {
		n := 1
		for _, v := range d {
			n *= v
		}
		im := BatchImage{W: n, H: 1, C: 4, Off: off, Stride: 4 * n}
		b.Src = append(b.Src, im)
		if op.Reduce != nil {
			b.Dst = append(b.Dst, BatchImage{Off: voff})
			voff += 4
		} else {
			b.Dst = append(b.Dst, im)
		}
		off = alignUp(off+uint64(4*n), 256)
	}
	return b
}

func TestArrayBatchCheck(t *testing.T) {
	scale, sum := arrayOpsOf("scale factor=2")[0], arrayOpsOf("sum")[0]
	tests := []struct {
		name string
		b    *Batch
		err  string
	}{
		{"ok", arrayBatch(scale, []int{3, 5}, nil, []int{1000}), ""},
		{"reduction ok", arrayBatch(sum, []int{7}, []int{1}), ""},
		{"empty batch", arrayBatch(scale), ""},
		{"axes differ", func() *Batch { b := arrayBatch(scale, []int{3, 5}); b.Dims[0] = []int{4, 5}; return b }(), "do not hold 15"},
		{"axes missing", func() *Batch { b := arrayBatch(scale, []int{3}); b.Dims = nil; return b }(), "and 0 axes"},
		{"an image", func() *Batch { b := arrayBatch(scale, []int{3}); b.Src[0].C = 3; return b }(), "array item"},
		{"misaligned", func() *Batch { b := arrayBatch(scale, []int{3}); b.Src[0].Off = 2; return b }(), "offset 2"},
		{"wrong output", func() *Batch { b := arrayBatch(scale, []int{3}); b.Dst[0].W = 2; return b }(), "want the source's"},
		{"values overlap", func() *Batch { b := arrayBatch(sum, []int{3}, []int{4}); b.Dst[1].Off = 2; return b }(), "offset 2"},
		{"values collide", func() *Batch { b := arrayBatch(sum, []int{3}, []int{4}); b.Dst[1].Off = 0; return b }(), "overlap"},
		{"unknown stage", arrayBatch(sched.Op{Name: "blur", Array: true}, []int{3}), "no GPU kernel"},
		{"reduction flag", arrayBatch(sched.Op{Name: "sum", Array: true, CPU: scale.CPU}, []int{3}), "reduces"},
		{"operand", arrayBatch(sched.Op{Name: "scale", Array: true, Args: array.AddArgs{Value: 2}}, []int{3}), "launch arguments are array.AddArgs, want array.ScaleArgs"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.b.Check()
			if (err == nil) != (tt.err == "") || (err != nil && !strings.Contains(err.Error(), tt.err)) {
				t.Errorf("Check = %v, want %q", err, tt.err)
			}
		})
	}
}

// The user array kernel's launch table holds each array's axes as int64s, one fixed
// record per array; the built-in array kernels need no table.
func TestArrayTables(t *testing.T) {
	uk := &userkernel.Kernel{Fn: "f", Out: userkernel.OutSame, Array: true}
	op := sched.Op{Name: "kernel", Array: true, Args: uk}
	b := arrayBatch(op, []int{2, 3}, nil, []int{4})
	if err := b.Check(); err != nil {
		t.Fatal(err)
	}
	n := TableBytes(op, 3)
	if n != 3*8*sched.MaxDims {
		t.Fatalf("TableBytes = %d", n)
	}
	tab := make([]byte, n)
	for i := range tab {
		tab[i] = 0xEE
	}
	if err := b.EncodeTable(tab); err != nil {
		t.Fatal(err)
	}
	rec := func(i, k int) uint64 { return binary.LittleEndian.Uint64(tab[i*kDimsRecord+8*k:]) }
	if rec(0, 0) != 2 || rec(0, 1) != 3 || rec(0, 2) != 0 || rec(1, 0) != 0 || rec(2, 0) != 4 || rec(2, sched.MaxDims-1) != 0 {
		t.Errorf("records: % x", tab[:24])
	}
	if err := b.EncodeTable(tab[:n-1]); err == nil {
		t.Error("a short table buffer is accepted")
	}
	if TableBytes(arrayOpsOf("scale")[0], 16) != 0 || MaxScratchBytes(arrayOpsOf("sum")[0], 4<<20, 16) != reduceScratch(1<<20) {
		t.Error("the built-in array kernels' table or scratch sizes")
	}
	if _, err := arrayLauncherFor(sched.Op{Name: "kernel", Array: true, Args: &userkernel.Kernel{Fn: "f"}}); err == nil {
		t.Error("the array launcher takes an image kernel")
	}
}
