package cudastage

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/imgpipe/imgpipe/cudastage/cu"
	"github.com/imgpipe/imgpipe/cudastage/cutest"
	"github.com/imgpipe/imgpipe/cudastage/sched"
	"github.com/imgpipe/imgpipe/cudastage/sched/schedtest"
	"github.com/imgpipe/imgpipe/stages"
	"github.com/imgpipe/imgpipe/stages/stagestest"
)

// GPU tests of the executor on the real device: the same scheduler as the
// CPU tests of package sched, with the CUDA adapter and kernels.

func exDevice(t testing.TB) *Device {
	t.Helper()
	g := requireGPU(t)
	d := NewDevice(g)
	t.Cleanup(func() {
		if err := d.Close(); err != nil {
			t.Error(err)
		}
	})
	// Open, as an executor's BindThread leaves it: tests call its methods directly.
	if err := d.OpenErr(); err != nil {
		t.Fatal(err)
	}
	return d
}

// exCPU runs ops with the stages reference (each op's bound CPU function):
// the output image and the last histogram (nil without one).
func exCPU(ops []sched.Op, src *stages.Image) (*stages.Image, *[256]uint64) {
	cur := src
	var hist *[256]uint64
	for _, op := range ops {
		if op.Hist {
			hist = new([256]uint64)
			op.CPU(nil, cur, hist)
			continue
		}
		out := op.OutShape(sched.Shape{W: cur.W, H: cur.H, C: cur.C})
		dst := stages.NewImage(out.W, out.H, out.C)
		op.CPU(dst, cur, nil)
		cur = dst
	}
	return cur, hist
}

// exRun pushes imgs through an executor on dev from several goroutines and
// compares every result with the CPU reference.
func exRun(t *testing.T, dev sched.Device, cfg sched.Config, imgs []*stages.Image) sched.Stats {
	t.Helper()
	// The CPU references, in parallel: a 4000×3000 blur takes seconds.
	wants := make([]*stages.Image, len(imgs))
	wantHists := make([]*[256]uint64, len(imgs))
	var refs sync.WaitGroup
	for i, m := range imgs {
		refs.Add(1)
		go func() {
			defer refs.Done()
			wants[i], wantHists[i] = exCPU(cfg.Ops, m)
		}()
	}
	refs.Wait()
	ctx := context.Background()
	e, err := sched.New(ctx, dev, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := e.Close(); err != nil {
			t.Error(err)
		}
	}()
	var next atomic.Int64
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1) - 1); i < len(imgs); i = int(next.Add(1) - 1) {
				m := imgs[i]
				r, err := e.Reserve(ctx, m.W, m.H, m.C, i)
				if err != nil {
					t.Error(err)
					return
				}
				copy(r.Image().Pix, m.Pix)
				r.Commit()
			}
		}()
	}
	go func() { wg.Wait(); e.CloseInput() }()
	seen := make([]bool, len(imgs))
	for r := range e.Results() {
		i := r.Tag.(int)
		seen[i] = true
		want, wantHist := wants[i], wantHists[i]
		m := r.Image
		if d := stagestest.Diff(m, want); d != "" {
			t.Errorf("image %d (%dx%dx%d in): %s (the CPU's)", i, imgs[i].W, imgs[i].H, imgs[i].C, d)
		}
		if (r.Hist == nil) != (wantHist == nil) || (r.Hist != nil && *r.Hist != *wantHist) {
			t.Errorf("image %d: histogram differs from the CPU", i)
		}
		r.Release()
	}
	if err := e.Wait(); err != nil {
		t.Fatal(err)
	}
	for i, ok := range seen {
		if !ok {
			t.Errorf("image %d never came back", i)
		}
	}
	return e.Stats()
}

// TestGPUExecutorMatchesCPU runs several chains over batches that mix sizes
// (1×1 up to 4000×3000, odd ones) and channels on the GPU, and compares every
// output and histogram with the CPU reference.
func TestGPUExecutorMatchesCPU(t *testing.T) {
	dev := exDevice(t)
	rng := rand.New(rand.NewPCG(1, 2))
	sizes := [][2]int{{1, 1}, {1, 77}, {77, 1}, {17, 9}, {33, 65}, {1920, 1080}, {640, 481}, {4000, 3000}, {2, 3}, {129, 31}}
	var imgs []*stages.Image
	for i := range 2 * len(sizes) {
		sz := sizes[i%len(sizes)]
		c := 3
		if i >= len(sizes) {
			c = 1
		}
		imgs = append(imgs, stagestest.RandImage(rng, sz[0], sz[1], c))
	}
	chains := []struct {
		name string
		ops  []sched.Op
	}{
		{"target", opsOf("grayscale | blur sigma=1.5 | transpose | histogram")},
		{"boxblur15-transpose", opsOf("boxblur radius=15 | transpose")},
		{"boxblur0-boxblur1", opsOf("boxblur radius=0 | boxblur radius=1")},
		// A spec holds one histogram at most; the executor takes two.
		{"hist-gray-hist", append(opsOf("histogram | grayscale"), opOf("histogram"))},
		{"blur32", opsOf("blur sigma=32")},
		{"transpose-blur0.5-grayscale", opsOf("transpose | blur sigma=0.5 | grayscale")},
		{"histogram", opsOf("histogram")},
	}
	for _, ch := range chains {
		t.Run(ch.name, func(t *testing.T) {
			// Slots hold a 4000×3000 RGB image with room to spare, so the
			// mixed sizes share batches and slots seal by capacity and count.
			cfg := sched.Config{Ops: ch.ops, Streams: 3, Slots: 5, Batch: 6, SlotBytes: 40 << 20}
			st := exRun(t, dev, cfg, imgs)
			t.Logf("%s: %v", ch.name, st)
		})
	}
}

// poisonedTable corrupts the third launch table: its first image's source
// offset points far outside device memory, as a bad table would.
type poisonedTable struct {
	*Device
	n atomic.Int64
}

func (p *poisonedTable) EncodeTable(call *sched.OpCall, dst []byte) error {
	if err := p.Device.EncodeTable(call, dst); err != nil {
		return err
	}
	if p.n.Add(1) == 3 {
		dst[6] = 0x40 // src_off += 2^54
	}
	return nil
}

// TestGPUExecutorFault runs a poisoned launch table in a child process (the
// fault ruins the CUDA context for the rest of the process): the executor
// must stop with a sticky error, end every goroutine, and never hang.
func TestGPUExecutorFault(t *testing.T) {
	if os.Getenv("IMGPIPE_EXEC_FAULT_CHILD") == "1" {
		faultChild(t)
		return
	}
	requireGPU(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, exe, "-test.run=^TestGPUExecutorFault$", "-test.v")
	cmd.Env = append(os.Environ(), "IMGPIPE_EXEC_FAULT_CHILD=1", cutest.EnvRequire+"=1")
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("the child hung after the device fault:\n%s", out)
	}
	if err != nil {
		t.Fatalf("child failed: %v\n%s", err, out)
	}
	t.Logf("child:\n%s", out)
}

func faultChild(t *testing.T) {
	g, err := OpenGPU(cutest.Require(t))
	if err != nil {
		t.Fatal(err)
	}
	d := NewDevice(g)
	dev := &poisonedTable{Device: d}
	ops := opsOf("grayscale | blur sigma=1.5 | transpose | histogram")
	ctx := context.Background()
	e, err := sched.New(ctx, dev, sched.Config{Ops: ops, Streams: 3, Slots: 4, Batch: 2, SlotBytes: 16 << 20})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	rng := rand.New(rand.NewPCG(4, 4))
	img := stagestest.RandImage(rng, 1920, 1080, 3)
	reserveErr := make(chan error, 1)
	go func() {
		defer e.CloseInput()
		for range 200 {
			r, err := e.Reserve(ctx, img.W, img.H, img.C, nil)
			if err != nil {
				reserveErr <- err
				return
			}
			copy(r.Image().Pix, img.Pix)
			r.Commit()
		}
	}()
	n := 0
	for r := range e.Results() {
		n++
		r.Release()
	}
	werr := e.Wait()
	t.Logf("after %d results and %v: Wait = %v", n, time.Since(start).Round(time.Millisecond), werr)
	if !cu.IsSticky(werr) {
		t.Fatalf("Wait = %v, want a sticky device error", werr)
	}
	if n >= 200 {
		t.Errorf("all %d images came back despite the fault", n)
	}
	if _, err := e.Reserve(ctx, 4, 4, 3, nil); err == nil {
		t.Error("Reserve succeeded after the fault")
	}
	if g.Err() == nil {
		t.Error("the GPU does not remember its fault")
	}
	select {
	case err := <-reserveErr:
		t.Logf("Reserve during the run: %v", err)
	case <-time.After(10 * time.Second):
		t.Error("the producer is still blocked in Reserve after the fault")
	}
	t.Logf("Close on the broken context: %v", e.Close())
}

// checkedFake is the CPU fake device that also checks every op and launch
// the executor makes against the kernels' own validation: each op passes the
// CUDA device's CheckOp, the placements turned into a Batch pass
// Batch.Check, the table fits TableBytes, and the scratch the executor sized
// per stream covers the Batch's.
type checkedFake struct {
	*schedtest.FakeDevice
	cap, batch int
	mu         sync.Mutex
	errs       []error
	runs       int
	checks     int
}

func (c *checkedFake) CheckOp(op sched.Op) error {
	if err := c.FakeDevice.CheckOp(op); err != nil {
		return err
	}
	var d *Device
	if err := d.CheckOp(op); err != nil {
		c.mu.Lock()
		c.errs = append(c.errs, err)
		c.mu.Unlock()
		return err
	}
	c.mu.Lock()
	c.checks++
	c.mu.Unlock()
	return nil
}

func (c *checkedFake) Run(s sched.Stream, call *sched.OpCall) error {
	b := batchOf(call)
	err := b.Check()
	if err == nil {
		tab := make([]byte, TableBytes(b.Op, len(b.Src)))
		err = b.EncodeTable(tab)
	}
	if err == nil {
		if need, have := b.ScratchBytes(), MaxScratchBytes(b.Op, uint64(c.cap), c.batch); need > have {
			err = fmt.Errorf("%s needs %d bytes of scratch, the executor sized %d", call.Op, need, have)
		}
	}
	c.mu.Lock()
	c.runs++
	if err != nil {
		c.errs = append(c.errs, err)
	}
	c.mu.Unlock()
	return c.FakeDevice.Run(s, call)
}

// TestAdapterBatches runs the scheduler on the CPU fake and checks that
// every launch it asks for is one the CUDA kernels accept (no GPU needed).
func TestAdapterBatches(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	var imgs []*stages.Image
	for i, sz := range [][2]int{{1, 1}, {1, 50}, {50, 1}, {17, 9}, {33, 65}, {100, 60}, {3, 3}, {64, 64}} {
		imgs = append(imgs, stagestest.RandImage(rng, sz[0], sz[1], 1+2*(i%2)))
	}
	chains := [][]sched.Op{
		opsOf("grayscale | blur sigma=1.5 | transpose | histogram"),
		opsOf("boxblur radius=15 | transpose | boxblur radius=0"),
		opsOf("histogram | blur sigma=4"),
	}
	for _, ops := range chains {
		const slotBytes, batch = 1 << 17, 5
		fake := &checkedFake{FakeDevice: schedtest.NewFake(schedtest.FakeConfig{}), cap: slotBytes, batch: batch}
		exRun(t, fake, sched.Config{Ops: ops, Streams: 2, Slots: 3, Batch: batch, SlotBytes: slotBytes}, imgs)
		fake.Close()
		if fake.runs == 0 || fake.checks < len(ops) {
			t.Errorf("%s: %d launches, %d ops checked", sched.SegmentString(ops), fake.runs, fake.checks)
		}
		for _, err := range fake.errs {
			t.Errorf("%s: %v", sched.SegmentString(ops), err)
		}
	}
}

// TestBatchOf checks that the executor's ops reach the kernels unchanged
// (same stage, spec, histogram flag, arguments and output shape) and that
// every op package pipeline binds for a stage with a GPU implementation
// passes the kernels' batch check.
func TestBatchOf(t *testing.T) {
	specs := []string{"boxblur radius=7", "blur sigma=2", "resize width=4 fit=cover filter=area", "crop width=3 gravity=south"}
	for _, name := range fatbinStages() { // every fatbin pixel stage, default parameters
		if launchers[name].encode == "" { // an encoder's op is no stage spec (TestPNGBatchOf)
			specs = append(specs, stageSpec(name))
		}
	}
	for _, spec := range specs {
		op := opOf(spec)
		in := sched.Shape{W: 9, H: 5, C: 3}
		out := op.OutShape(in)
		call := &sched.OpCall{Op: op, Images: []sched.OpImage{
			{In: in, Out: out, SrcOff: 0, DstOff: 0, HistOff: 0},
			{In: in, Out: out, SrcOff: 256, DstOff: 256, HistOff: sched.HistBytes},
		}}
		b := batchOf(call)
		got := b.Op
		if got.Name != op.Name || got.Spec != op.Spec || got.Hist != op.Hist || !reflect.DeepEqual(got.Args, op.Args) ||
			got.OutShape(in) != out || (got.CPU == nil) != (op.CPU == nil) {
			t.Errorf("batchOf(%v).Op = %+v, want %+v", op, got, op)
		}
		if err := b.Check(); err != nil {
			t.Errorf("batchOf(%v) fails the kernels' check: %v", op, err)
		}
	}
}
