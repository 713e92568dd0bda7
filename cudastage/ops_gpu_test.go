package cudastage

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"github.com/imgpipe/imgpipe/cudastage/cu"
	"github.com/imgpipe/imgpipe/cudastage/sched"
	"github.com/imgpipe/imgpipe/stages"
)

// GPU tests of the batched kernels: every kernel against the stages CPU
// reference, bit for bit, on random images.
// With IMGPIPE_FATBIN set (kernels.EnvFatbin), every GPU test, this one and
// the engine's, runs build.sh's fresh output instead of the embedded fatbin.

// testKernels loads the kernels into the current context (inside g.Do).
func testKernels(t testing.TB) *Kernels {
	t.Helper()
	k, err := LoadKernels()
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// devMem is device memory freed at the end of the test (inside g.Do).
func devMem(t testing.TB, g *GPU, n uint64) cu.DevicePtr {
	t.Helper()
	p, err := cu.MemAlloc(max(n, 1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := g.Do(func() error { return cu.MemFree(p) }); err != nil {
			t.Error(err)
		}
	})
	return p
}

// testSizes are the image sizes of the bit-exactness tests (W, H). -short
// (the compute-sanitizer runs) leaves out the large ones, which the
// sanitizer would take minutes over, and adds mid-sized ones that still
// reach every kernel's interior (vector) paths.
func testSizes() [][2]int {
	s := [][2]int{{1, 1}, {1, 301}, {301, 1}, {17, 9}, {33, 65}}
	if testing.Short() {
		return append(s, [2]int{256, 130}, [2]int{130, 77})
	}
	return append(s, [2]int{1920, 1080}, [2]int{4000, 3000})
}

// layout is how a test places images in a buffer.
type layout int

const (
	packed layout = iota // Pack with 256-byte alignment: vector paths
	ragged               // odd offsets and padded strides: unaligned paths
)

// place returns placements for the shapes in the layout, and the buffer size.
func place(t testing.TB, shapes []BatchImage, l layout, rng *rand.Rand) ([]BatchImage, uint64) {
	t.Helper()
	if l == packed {
		p, n, err := Pack(shapes, 256)
		if err != nil {
			t.Fatal(err)
		}
		return p, n
	}
	out := make([]BatchImage, len(shapes))
	off := uint64(rng.IntN(8))
	for i, s := range shapes {
		s.Stride = s.W*s.C + rng.IntN(6)
		s.Off = off
		out[i] = s
		off += s.span() + uint64(rng.IntN(8))
	}
	return out, off
}

// randomImages fills a host buffer with random bytes (padding included) and
// returns stages.Image views of the placements in it.
func randomImages(buf []byte, imgs []BatchImage, rng *rand.Rand) []*stages.Image {
	for i := 0; i+8 <= len(buf); i += 8 {
		binary.LittleEndian.PutUint64(buf[i:], rng.Uint64())
	}
	for i := len(buf) &^ 7; i < len(buf); i++ {
		buf[i] = byte(rng.Uint32())
	}
	views := make([]*stages.Image, len(imgs))
	for i, im := range imgs {
		views[i] = &stages.Image{W: im.W, H: im.H, C: im.C, Stride: im.Stride, Pix: buf[im.Off : im.Off+im.span()]}
	}
	return views
}

// cpuResult is what the CPU reference makes of one image.
type cpuResult struct {
	img  *stages.Image // nil for the histogram
	hist [256]uint64
}

// reference runs op on every image with its bound CPU function (the stages
// package's, as the registry binds it), in parallel.
func reference(op sched.Op, src []*stages.Image) []cpuResult {
	out := make([]cpuResult, len(src))
	var wg sync.WaitGroup
	for i, s := range src {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if op.Hist {
				op.CPU(nil, s, &out[i].hist)
				return
			}
			sh := op.OutShape(sched.Shape{W: s.W, H: s.H, C: s.C})
			dst := stages.NewImage(sh.W, sh.H, sh.C)
			op.CPU(dst, s, nil)
			out[i].img = dst
		}()
	}
	wg.Wait()
	return out
}

// poisons are written over the destination and scratch before each run: a
// sample the kernel leaves unwritten cannot match the reference under both.
var poisons = []byte{0x00, 0xff}

// runOnGPU uploads the source buffer, poisons the destination and scratch
// with v, runs the batch on a stream and returns the destination buffer's
// bytes (inside g.Do).
func runOnGPU(t testing.TB, g *GPU, k *Kernels, b *Batch, src []byte, dstSize uint64, v byte) []byte {
	t.Helper()
	table := make([]byte, TableBytes(b.Op, len(b.Src)))
	if err := b.EncodeTable(table); err != nil {
		t.Fatal(err)
	}
	buf := Buffers{
		Src:   devMem(t, g, uint64(len(src))),
		Dst:   devMem(t, g, dstSize),
		Table: devMem(t, g, uint64(len(table))),
	}
	scratch := b.ScratchBytes()
	if scratch > 0 {
		buf.Scratch = devMem(t, g, scratch)
	}
	s, err := cu.StreamCreate(true)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Destroy()
	err = errors.Join(
		cu.MemcpyHtoD(buf.Src, src),
		cu.MemcpyHtoD(buf.Table, table),
		cu.MemsetD8Async(buf.Dst, v, dstSize, s),
		cu.MemsetD8Async(buf.Scratch, v, scratch, s),
	)
	if err != nil {
		t.Fatal(err)
	}
	if err := k.Run(s, b, buf); err != nil {
		t.Fatal(err)
	}
	if err := s.Synchronize(); err != nil {
		t.Fatal(err)
	}
	out := make([]byte, dstSize)
	if err := cu.MemcpyDtoH(out, buf.Dst); err != nil {
		t.Fatal(err)
	}
	return out
}

// compare checks the GPU's destination buffer against the reference: every
// image byte for byte (or every count), and every byte outside the outputs
// still holding the poison.
func compare(t testing.TB, b *Batch, ref []cpuResult, got []byte, poison byte) {
	t.Helper()
	written := make([]bool, len(got))
	bad := 0
	for i, d := range b.Dst {
		if b.Op.Hist {
			for bin := range 256 {
				o := d.Off + uint64(bin)*8
				for j := range 8 {
					written[o+uint64(j)] = true
				}
				if c := binary.LittleEndian.Uint64(got[o:]); c != ref[i].hist[bin] {
					t.Errorf("image %d (%dx%dx%d) bin %d: GPU %d, CPU %d", i, b.Src[i].W, b.Src[i].H, b.Src[i].C, bin, c, ref[i].hist[bin])
					if bad++; bad > 10 {
						t.FailNow()
					}
				}
			}
			continue
		}
		want := ref[i].img
		for y := range d.H {
			o := d.Off + uint64(y)*uint64(d.Stride)
			row := got[o : o+uint64(d.W*d.C)]
			for j := range row {
				written[o+uint64(j)] = true
			}
			if w := want.Row(y); !bytes.Equal(row, w) {
				x := 0
				for row[x] == w[x] {
					x++
				}
				t.Errorf("image %d (%dx%dx%d -> %dx%dx%d) row %d differs first at byte %d: GPU %d, CPU %d",
					i, b.Src[i].W, b.Src[i].H, b.Src[i].C, d.W, d.H, d.C, y, x, row[x], w[x])
				if bad++; bad > 10 {
					t.FailNow()
				}
				break
			}
		}
	}
	for o, w := range written {
		if !w && got[o] != poison {
			t.Fatalf("byte %d outside every output was written (%#x, poison %#x)", o, got[o], poison)
		}
	}
}

// checkOnGPU runs op over the shapes (in the given layout) on the GPU and
// compares with the CPU, once per poison value.
func checkOnGPU(t *testing.T, g *GPU, k *Kernels, op sched.Op, shapes []BatchImage, l layout, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 7))
	srcP, srcSize := place(t, shapes, l, rng)
	host := make([]byte, srcSize)
	views := randomImages(host, srcP, rng)
	b := &Batch{Op: op, Src: srcP}
	var dstSize uint64
	if op.Hist {
		b.Dst = make([]BatchImage, len(srcP))
		for i := range b.Dst {
			// Ragged: gaps between the count arrays, which must stay poisoned.
			b.Dst[i].Off = dstSize + uint64(l)*8*uint64(rng.IntN(4))
			dstSize = b.Dst[i].Off + sched.HistBytes
		}
	} else {
		out := make([]BatchImage, len(srcP))
		for i, s := range srcP {
			sh := op.OutShape(s.shape())
			out[i] = BatchImage{W: sh.W, H: sh.H, C: sh.C}
		}
		b.Dst, dstSize = place(t, out, l, rng)
	}
	ref := reference(op, views)
	for _, v := range poisons {
		got := runOnGPU(t, g, k, b, host, dstSize, v)
		compare(t, b, ref, got, v)
	}
}

// dropLarge leaves out images over 4 MP.
func dropLarge(imgs []BatchImage) []BatchImage {
	return slices.DeleteFunc(slices.Clone(imgs), func(im BatchImage) bool { return im.W*im.H > 4<<20 })
}

// testOps are the ops TestGPUKernelsMatchCPU runs over large images and ragged layouts,
// which reach the kernels' vector and unaligned paths. That every registered GPU stage
// gives the CPU's bits at all is package pipeline's TestGPUStagesMatchCPU, which walks the
// registry, so a stage missing here is still checked.
func testOps() []sched.Op {
	ops := []sched.Op{opOf("grayscale"), opOf("histogram"), opOf("transpose")}
	for _, s := range []float64{0.5, 1.5, 4, 32} {
		ops = append(ops, opOf(fmt.Sprintf("blur sigma=%g", s)))
	}
	for _, r := range []int{0, 1, 5, 15} {
		ops = append(ops, opOf(fmt.Sprintf("boxblur radius=%d", r)))
	}
	// The geometry stages: every flip, rotation and filter, each resize
	// shrinking some images of the batch and enlarging others.
	for _, spec := range []string{"flip axis=h", "flip axis=v", "rotate angle=90", "rotate angle=180", "rotate angle=270",
		"crop x=5 y=3 width=20 height=30", "crop width=100 height=7 gravity=southeast", "crop width=9 gravity=center",
		"resize width=256 height=256 fit=inside filter=lanczos3", "resize width=97 height=61 filter=area",
		"resize width=640 height=300 fit=cover filter=linear", "resize width=1500 filter=lanczos3",
		"resize height=40 filter=area", "resize width=300 height=300 fit=cover filter=lanczos3"} {
		ops = append(ops, opOf(spec))
	}
	return ops
}

// opName names a test op by its stage and kernel radius ("blur-r5").
func opName(op sched.Op) string {
	switch a := op.Args.(type) {
	case stages.BlurArgs:
		return fmt.Sprintf("%s-r%d", op.Name, len(a.Taps)/2)
	case stages.BoxBlurArgs:
		return fmt.Sprintf("%s-r%d", op.Name, a.Radius)
	}
	if op.Args != nil { // the geometry stages: their canonical spec
		return op.Spec
	}
	return op.Name
}

// TestGPUKernelsMatchCPU runs every kernel on batches that hold every test
// size at once: all RGB, all gray, and a ragged one that alternates channels
// with odd offsets and padded strides, and compares each with package stages.
func TestGPUKernelsMatchCPU(t *testing.T) {
	g := requireGPU(t)
	var rgb, gray, mixed []BatchImage
	for i, s := range testSizes() {
		rgb = append(rgb, BatchImage{W: s[0], H: s[1], C: 3})
		gray = append(gray, BatchImage{W: s[0], H: s[1], C: 1})
		mixed = append(mixed, BatchImage{W: s[0], H: s[1], C: 1 + 2*(i%2)})
	}
	// Big images first in the mixed batch, so that small ones sit at the end
	// of the launch's block range too.
	slices.Reverse(mixed)
	k := loadTestKernels(t, g)
	for i, op := range testOps() {
		// Subtests run on goroutines of their own: each makes the context
		// current again through g.Do.
		t.Run(opName(op), func(t *testing.T) {
			gray, mixed := gray, mixed
			if a, ok := op.Args.(stages.BlurArgs); ok && len(a.Taps) > 2*12+1 {
				// The CPU reference takes most of a minute per 12 MP
				// image at sigma 32: the RGB batch has it already.
				gray, mixed = dropLarge(gray), dropLarge(mixed)
			}
			err := g.Do(func() error {
				checkOnGPU(t, g, k, op, rgb, packed, uint64(3*i))
				checkOnGPU(t, g, k, op, gray, packed, uint64(3*i+1))
				checkOnGPU(t, g, k, op, mixed, ragged, uint64(3*i+2))
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
		})
	}
}

// loadTestKernels loads the kernels through g.Do and unloads them when the
// test ends.
func loadTestKernels(t testing.TB, g *GPU) *Kernels {
	t.Helper()
	var k *Kernels
	if err := g.Do(func() error { k = testKernels(t); return nil }); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := g.Do(k.Unload); err != nil {
			t.Error(err)
		}
	})
	return k
}

// TestGPUKernelsChain runs the target chain grayscale → blur σ1.5 →
// transpose → histogram on the device, each op's outputs (Outputs) feeding
// the next op with intermediates kept in two device buffers, all tables in
// one upload, and compares the final images and the histograms with the CPU.
func TestGPUKernelsChain(t *testing.T) {
	g := requireGPU(t)
	rng := rand.New(rand.NewPCG(42, 42))
	shapes := []BatchImage{{W: 640, H: 360, C: 3}, {W: 17, H: 9, C: 3}, {W: 1, H: 1, C: 3}, {W: 333, H: 501, C: 3}}
	ops := opsOf("grayscale | blur sigma=1.5 | transpose | histogram")
	src, srcSize, err := Pack(shapes, 256)
	if err != nil {
		t.Fatal(err)
	}
	host := make([]byte, srcSize)
	views := randomImages(host, src, rng)

	// Plan the chain on the host: batches, buffer sizes, table offsets.
	var batches []*Batch
	var tableSize int
	tableOff := []int{}
	bufSize := srcSize
	scratch := uint64(0)
	cur := src
	for _, op := range ops {
		b := &Batch{Op: op, Src: cur}
		var n uint64
		if b.Dst, n, err = Outputs(op, cur, 256); err != nil {
			t.Fatal(err)
		}
		if !op.Hist {
			cur, bufSize = b.Dst, max(bufSize, n)
		}
		scratch = max(scratch, b.ScratchBytes())
		tableOff = append(tableOff, tableSize)
		tableSize += TableBytes(op, len(src))
		batches = append(batches, b)
	}
	tables := make([]byte, tableSize)
	for i, b := range batches {
		if err := b.EncodeTable(tables[tableOff[i]:]); err != nil {
			t.Fatal(err)
		}
	}

	// The CPU chain.
	want := make([]*stages.Image, len(views))
	wantHist := make([][256]uint64, len(views))
	for i, v := range views {
		gray := stages.NewImage(v.W, v.H, 1)
		stages.Grayscale(gray, v)
		blur := stages.NewImage(v.W, v.H, 1)
		stages.Blur(blur, gray, ops[1].Args.(stages.BlurArgs).Taps)
		want[i] = stages.NewImage(v.H, v.W, 1)
		stages.Transpose(want[i], blur)
		stages.Histogram(&wantHist[i], want[i])
	}

	err = g.Do(func() error {
		k := testKernels(t)
		defer k.Unload()
		bufs := [2]cu.DevicePtr{devMem(t, g, bufSize), devMem(t, g, bufSize)}
		hist := devMem(t, g, uint64(len(src))*sched.HistBytes)
		tmp := devMem(t, g, scratch)
		tab := devMem(t, g, uint64(tableSize))
		s, err := cu.StreamCreate(true)
		if err != nil {
			return err
		}
		defer s.Destroy()
		if err := errors.Join(cu.MemcpyHtoD(bufs[0], host), cu.MemcpyHtoD(tab, tables),
			cu.MemsetD8Async(bufs[1], 0xA5, bufSize, s), cu.MemsetD8Async(tmp, 0xA5, scratch, s),
			cu.MemsetD8Async(hist, 0xA5, uint64(len(src))*sched.HistBytes, s)); err != nil {
			return err
		}
		in := 0
		for i, b := range batches {
			buf := Buffers{Src: bufs[in], Dst: bufs[1-in], Scratch: tmp, Table: tab + cu.DevicePtr(tableOff[i])}
			if b.Op.Hist {
				buf.Dst = hist
			}
			if err := k.Run(s, b, buf); err != nil {
				return err
			}
			if !b.Op.Hist {
				in = 1 - in
			}
		}
		if err := s.Synchronize(); err != nil {
			return err
		}
		out := make([]byte, bufSize)
		counts := make([]byte, len(src)*sched.HistBytes)
		if err := errors.Join(cu.MemcpyDtoH(out, bufs[in]), cu.MemcpyDtoH(counts, hist)); err != nil {
			return err
		}
		for i, d := range cur {
			got := &stages.Image{W: d.W, H: d.H, C: d.C, Stride: d.Stride, Pix: out[d.Off : d.Off+d.span()]}
			for y := range d.H {
				if !bytes.Equal(got.Row(y), want[i].Row(y)) {
					t.Errorf("image %d row %d differs from the CPU chain", i, y)
					break
				}
			}
			for bin := range 256 {
				if c := binary.LittleEndian.Uint64(counts[i*sched.HistBytes+bin*8:]); c != wantHist[i][bin] {
					t.Errorf("image %d histogram bin %d: GPU %d, CPU %d", i, bin, c, wantHist[i][bin])
					break
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestGPUKernelsErrors checks that bad launches come back as Go errors and
// leave the context usable: an impossible launch configuration is refused by
// the driver (not sticky), bad batches and buffers are refused before any
// driver call, and afterwards a good batch still runs correctly.
func TestGPUKernelsErrors(t *testing.T) {
	g := requireGPU(t)
	err := g.Do(func() error {
		k := testKernels(t)
		defer k.Unload()
		s, err := cu.StreamCreate(true)
		if err != nil {
			return err
		}
		defer s.Destroy()
		p := devMem(t, g, 1<<20)
		n := int32(1)
		var taps tapsParam
		taps.R = 1
		cases := []struct {
			name   string
			blocks int
			smem   uint32
		}{
			{"empty grid", 0, 0},
			{"shared memory over the limit", 1, 1 << 30},
		}
		for _, c := range cases {
			err := launchRaw(k, "imgpipe_blur_v", c.blocks, c.smem, s, &p, &n, &p, &p, &taps)
			var ce *cu.Error
			if !errors.As(err, &ce) || ce.Sticky() {
				t.Errorf("%s: launch returned %v, want a non-sticky *cu.Error", c.name, err)
			} else {
				t.Logf("%s: %v", c.name, err)
			}
		}
		if err := s.Synchronize(); err != nil && cu.IsSticky(err) {
			return fmt.Errorf("context faulted by the refused launches: %w", err)
		}

		b := testBatchGPU(t)
		good := Buffers{Src: p, Dst: p + 1<<18, Table: p + 1<<19}
		bad := []struct {
			name string
			b    *Batch
			buf  Buffers
		}{
			{"no table", b, Buffers{Src: p, Dst: p + 1<<18}},
			{"in place", b, Buffers{Src: p, Dst: p, Table: p + 1<<19}},
			{"bad op", &Batch{Op: sched.Op{Name: "blur", Args: stages.BlurArgs{Taps: []uint32{1, 2}}}, Src: b.Src, Dst: b.Dst}, good},
			{"stage without a kernel", &Batch{Op: sched.Op{Name: "sharpen"}, Src: b.Src, Dst: b.Dst}, good},
			{"mismatched shapes", &Batch{Op: opOf("transpose"), Src: b.Src, Dst: b.Src}, good},
		}
		for _, c := range bad {
			if err := k.Run(s, c.b, c.buf); err == nil {
				t.Errorf("%s: Run accepted it", c.name)
			}
		}
		if g.Err() != nil {
			return g.Err()
		}
		return s.Synchronize()
	})
	if err != nil {
		t.Fatal(err)
	}
	// The context still works: a real batch gives the CPU's bits.
	err = g.Do(func() error {
		k := testKernels(t)
		defer k.Unload()
		checkOnGPU(t, g, k, opOf("grayscale"), []BatchImage{{W: 100, H: 20, C: 3}}, packed, 9)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// launchRaw queues kernel with a 1-D grid of blocks of kThreads threads, as
// Kernels.Run does but without its checks, so that the driver sees the
// configuration as given.
func launchRaw(k *Kernels, kernel string, blocks int, smem uint32, s cu.Stream, args ...any) error {
	fn, ok := k.fn[kernel]
	if !ok {
		return fmt.Errorf("kernel %s is not loaded", kernel)
	}
	return cu.LaunchKernel(fn, [3]uint32{uint32(blocks), 1, 1}, [3]uint32{kThreads, 1, 1}, smem, s, args...)
}

// testBatchGPU is a small valid grayscale batch placed in the first 256 KiB.
func testBatchGPU(t testing.TB) *Batch {
	src, _, err := Pack([]BatchImage{{W: 64, H: 32, C: 3}, {W: 9, H: 9, C: 3}}, 256)
	if err != nil {
		t.Fatal(err)
	}
	gray := opOf("grayscale")
	dst, _, err := Outputs(gray, src, 256)
	if err != nil {
		t.Fatal(err)
	}
	return &Batch{Op: gray, Src: src, Dst: dst}
}
