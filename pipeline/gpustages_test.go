package pipeline_test

import (
	"encoding/binary"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/imgpipe/imgpipe/cudastage"
	"github.com/imgpipe/imgpipe/cudastage/cutest"
	"github.com/imgpipe/imgpipe/cudastage/sched"
	"github.com/imgpipe/imgpipe/cudastage/sched/schedtest"
	"github.com/imgpipe/imgpipe/pipeline"
	_ "github.com/imgpipe/imgpipe/pipeline/kernelstage" // the kernel stage has a launcher too
	"github.com/imgpipe/imgpipe/stages"
	"github.com/imgpipe/imgpipe/stages/stagestest"
)

// The registry's GPU stages against the device layers, found by walking pipeline.Builtin,
// so that a new stage is checked without being added to any list here: every stage with a
// GPU implementation has a launcher in package cudastage (and every launcher a stage), and
// its ops, bound from parameter sets made from its ParamSpecs, give the CPU's bits on the
// fake device and, where there is one, on a GPU.

// TestStagesMatchLaunchers checks that the stages of pipeline.Builtin that declare a GPU
// implementation are exactly those with a registered launcher (an array launcher for those
// that take arrays).
func TestStagesMatchLaunchers(t *testing.T) {
	var gpu, arrays []string
	for _, d := range pipeline.Builtin.Stages() {
		switch {
		case d.GPU != nil && d.Kind == pipeline.ArrayKind:
			arrays = append(arrays, d.Name)
		case d.GPU != nil:
			gpu = append(gpu, d.Name)
		}
		if d.ArrayGPU != nil {
			arrays = append(arrays, d.Name)
		}
	}
	if len(gpu) == 0 {
		t.Fatal("pipeline.Builtin has no stage with a GPU implementation")
	}
	pixel, array := cudastage.LaunchedStages()
	slices.Sort(gpu)
	slices.Sort(arrays)
	for _, c := range []struct {
		what             string
		stages, launched []string
	}{{"pixel", gpu, pixel}, {"array", arrays, array}} {
		for _, n := range c.stages {
			if !slices.Contains(c.launched, n) {
				t.Errorf("stage %s has a GPU implementation in pipeline.Builtin but no %s launcher in package cudastage", n, c.what)
			}
		}
		for _, n := range c.launched {
			if !slices.Contains(c.stages, n) {
				t.Errorf("%s launcher %s is registered but pipeline.Builtin has no stage %s with a GPU implementation", c.what, n, n)
			}
		}
	}
}

// TestStagesBitsFake runs the bit check on the fake device, which runs each op's CPU
// function: it proves every parameter set binds, is accepted by the CUDA launchers' checks
// (which need no GPU) and travels through the executor.
func TestStagesBitsFake(t *testing.T) {
	dev := schedtest.NewFake(schedtest.FakeConfig{})
	defer dev.Close()
	checkStageBits(t, dev)
}

// TestGPUStagesMatchCPU runs the bit check on a GPU: every registered GPU stage's kernels
// give its CPU implementation's bits.
func TestGPUStagesMatchCPU(t *testing.T) {
	dev, closeDev, err := cudastage.Open(cutest.Require(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := closeDev(); err != nil {
			t.Error(err)
		}
	})
	checkStageBits(t, dev)
}

// bitSizes are the sizes of the check's images (W, H), odd ones from 1×1 up; each comes
// in gray and in RGB.
var bitSizes = [][2]int{{1, 1}, {1, 7}, {7, 1}, {3, 5}, {13, 9}, {37, 23}, {5, 101}}

// maxBitSamples bounds the samples of any output of the check, so that a parameter at its
// range's end (a resize to its largest side) stays cheap; a set over it is left out.
const maxBitSamples = 1 << 22

// checkStageBits bit-checks every stage of pipeline.Builtin with a GPU implementation and
// a CPU reference on dev. A GPU-only stage (kernel) has no reference: its launcher is
// checked by TestStagesMatchLaunchers and its own package's tests.
func checkStageBits(t *testing.T, dev sched.Device) {
	for _, d := range pipeline.Builtin.Stages() {
		if d.GPU == nil || d.GPUOnly != "" {
			continue
		}
		t.Run(d.Name, func(t *testing.T) {
			bound := 0
			for _, args := range paramSets(d) {
				op, ok := bindStage(t, d, args)
				if !ok {
					continue
				}
				bound++
				if err := (*cudastage.Device)(nil).CheckOp(op); err != nil {
					t.Errorf("%s: the CUDA launcher refuses the op: %v", op, err)
					continue
				}
				if op.Array {
					checkArrayBits(t, dev, op, seedOf(op.Spec))
				} else {
					checkImageBits(t, dev, op, seedOf(op.Spec))
				}
			}
			if bound == 0 {
				t.Errorf("no parameter set of stage %s binds", d.Name)
			}
		})
	}
}

// paramSets are the parameters a stage is checked with: a base (its defaults, with Int
// parameters whose default is their range's least value set above it when the defaults
// alone do not bind, as resize's 0×0), then the base with one parameter changed, to each
// end of its range and to each value of its enum.
func paramSets(d *pipeline.StageDef) []pipeline.Args {
	base := pipeline.Args{}
	if _, ok := bindStage(nil, d, base); !ok {
		for _, ps := range d.Params {
			if v, isInt := ps.Default.(int64); isInt && ps.Range != nil && float64(v) == ps.Range.Min {
				base[ps.Name] = int64(ps.Range.Min) + 7
			}
		}
	}
	sets := []pipeline.Args{base}
	with := func(name string, v any) {
		set := maps(base)
		set[name] = v
		sets = append(sets, set)
	}
	for _, ps := range d.Params {
		switch {
		case ps.Kind == pipeline.Enum:
			for _, v := range ps.Values {
				with(ps.Name, v)
			}
		case ps.Range != nil && ps.Kind == pipeline.Int:
			with(ps.Name, int64(ps.Range.Min))
			with(ps.Name, int64(ps.Range.Max))
		case ps.Range != nil && ps.Kind == pipeline.Float:
			lo := ps.Range.Min
			if ps.Range.MinOpen {
				lo = math.Nextafter(lo, math.Inf(1))
			}
			with(ps.Name, lo)
			with(ps.Name, ps.Range.Max)
		}
	}
	return sets
}

// maps copies args.
func maps(args pipeline.Args) pipeline.Args {
	out := pipeline.Args{}
	for k, v := range args {
		out[k] = v
	}
	return out
}

// bindStage binds d with args into its device op, as a run binds it (the planner after a
// source stage). ok is false for a set that does not bind, or whose outputs would be over
// maxBitSamples; t, when not nil, logs why.
func bindStage(t *testing.T, d *pipeline.StageDef, args pipeline.Args) (sched.Op, bool) {
	src := "decode"
	if d.Kind == pipeline.ArrayKind {
		src = "load"
	}
	plan, err := pipeline.New().Then(src, nil).Then(d.Name, args).Plan()
	var ops []sched.Op
	if err == nil {
		ops, err = plan.DeviceOps()
	}
	if err == nil && len(ops) != 1 {
		t.Fatalf("%s %v: %d device ops, want 1", d.Name, args, len(ops))
	}
	if err != nil {
		if t != nil {
			t.Logf("%s %v: left out: %v", d.Name, args, err)
		}
		return sched.Op{}, false
	}
	for _, s := range bitSizes {
		if out := ops[0].OutShape(stages.Shape{W: s[0], H: s[1], C: 3}); int64(out.W)*int64(out.H)*int64(out.C) > maxBitSamples {
			if t != nil {
				t.Logf("%s: left out: %v gives %v", ops[0], s, out)
			}
			return sched.Op{}, false
		}
	}
	return ops[0], true
}

// seedOf is a random seed that depends on the op's text only.
func seedOf(spec string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(spec))
	return h.Sum64()
}

// checkImageBits runs op on dev over random images of every bit size, gray and RGB, in
// one batch, and compares each output (and histogram) with the op's CPU function.
func checkImageBits(t *testing.T, dev sched.Device, op sched.Op, seed uint64) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 41))
	var in []*stages.Image
	for _, s := range bitSizes {
		for _, c := range []int{1, 3} {
			m := stages.NewImage(s[0], s[1], c)
			for i := range m.Pix {
				m.Pix[i] = byte(rng.Uint32())
			}
			in = append(in, m)
		}
	}
	got := runOnDevice(t, dev, op, slotBytes(op, in), len(in), func(e *sched.Executor, i int) (*sched.Reservation, error) {
		r, err := e.Reserve(t.Context(), in[i].W, in[i].H, in[i].C, i)
		if err == nil {
			for y := range in[i].H {
				copy(r.Image().Row(y), in[i].Row(y))
			}
		}
		return r, err
	})
	for i, src := range in {
		want, hist := src, new([256]uint64) // a histogram op passes its image through
		if op.Hist {
			op.CPU(nil, src, hist)
		} else {
			out := op.OutShape(src.Shape())
			want = stages.NewImage(out.W, out.H, out.C)
			op.CPU(want, src, nil)
		}
		g := got[i]
		switch {
		case g.err != nil:
			t.Errorf("%s on %v: %v", op, src.Shape(), g.err)
		case stagestest.Diff(g.image, want) != "":
			t.Errorf("%s on %v: the device's output differs from the CPU's: %s", op, src.Shape(), stagestest.Diff(g.image, want))
		case op.Hist && (g.hist == nil || *g.hist != *hist):
			t.Errorf("%s on %v: the device's histogram differs from the CPU's", op, src.Shape())
		}
	}
}

// arrayLengths are the element counts of the check's arrays.
var arrayLengths = []int{1, 7, 255, 256, 257, 1000, 65537}

// checkArrayBits runs the array op on dev over random float32 arrays (with zeros of both
// signs, infinities and NaN among them) and compares each output's bits, or each
// reduction's value, with the op's CPU function.
func checkArrayBits(t *testing.T, dev sched.Device, op sched.Op, seed uint64) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 42))
	specials := []float32{0, float32(math.Copysign(0, -1)), float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN())}
	var in []*stages.Image
	for k, n := range arrayLengths {
		m := stages.NewImage(n, 1, sched.ElemBytes)
		for i := range n {
			v := float32(rng.NormFloat64() * 1000)
			if k%2 == 1 && rng.IntN(50) == 0 {
				v = specials[rng.IntN(len(specials))]
			}
			binary.LittleEndian.PutUint32(m.Pix[4*i:], math.Float32bits(v))
		}
		in = append(in, m)
	}
	got := runOnDevice(t, dev, op, slotBytes(op, in), len(in), func(e *sched.Executor, i int) (*sched.Reservation, error) {
		r, err := e.ReserveArray(t.Context(), []int{in[i].W}, i)
		if err == nil {
			copy(r.Image().Pix, in[i].Pix)
		}
		return r, err
	})
	for i, src := range in {
		g := got[i]
		if g.err != nil {
			t.Errorf("%s on %d elements: %v", op, src.W, g.err)
			continue
		}
		if op.Reduce != nil {
			want := op.Reduce(src)
			if len(g.values) != 1 || math.Float32bits(g.values[0]) != math.Float32bits(want) {
				t.Errorf("%s on %d elements: device %v, CPU %v", op, src.W, g.values, want)
			}
			continue
		}
		want := stages.NewImage(src.W, 1, sched.ElemBytes)
		op.CPU(want, src, nil)
		if d := stagestest.Diff(g.image, want); d != "" {
			t.Errorf("%s on %d elements: the device's output bits differ from the CPU's: %s", op, src.W, d)
		}
	}
}

// deviceOut is one result of runOnDevice, copied out of the executor's memory.
type deviceOut struct {
	image  *stages.Image
	hist   *[256]uint64
	values []float32
	err    error
}

// slotBytes is a slot's size for op over the items in, all in one batch: room for the
// larger of each item's input and output, aligned, and for its histogram.
func slotBytes(op sched.Op, in []*stages.Image) int {
	n := sched.Align
	for _, m := range in {
		b := max(m.Shape().Bytes(), op.OutShape(m.Shape()).Bytes())
		n += (b+sched.Align-1)/sched.Align*sched.Align + sched.HistBytes
	}
	return n
}

// runOnDevice runs the segment of op alone on dev, in slots of slot bytes, over n items,
// which reserve places in the executor's input (item i tagged i), in one batch, and returns
// their results by tag.
func runOnDevice(t *testing.T, dev sched.Device, op sched.Op, slot, n int, reserve func(e *sched.Executor, i int) (*sched.Reservation, error)) []deviceOut {
	t.Helper()
	e, err := sched.New(t.Context(), dev, sched.Config{Ops: []sched.Op{op}, Streams: 1, Slots: 1, Batch: n, SlotBytes: slot})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	for i := range n {
		r, err := reserve(e, i)
		if err != nil {
			t.Fatalf("%s: item %d: %v", op, i, err)
		}
		r.Commit()
	}
	e.CloseInput()
	out := make([]deviceOut, n)
	for res := range e.Results() {
		o := deviceOut{err: res.Err, hist: res.Hist, values: slices.Clone(res.Values)}
		if res.Image != nil {
			o.image = stages.NewImage(res.Image.W, res.Image.H, res.Image.C)
			for y := range res.Image.H {
				copy(o.image.Row(y), res.Image.Row(y))
			}
		}
		out[res.Tag.(int)] = o
		res.Release()
	}
	if err := e.Wait(); err != nil {
		t.Fatalf("%s: %v", op, err)
	}
	return out
}
