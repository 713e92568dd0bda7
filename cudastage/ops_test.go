package cudastage

import (
	"encoding/binary"
	"slices"
	"strings"
	"testing"

	"github.com/imgpipe/imgpipe/cudastage/cu"
	"github.com/imgpipe/imgpipe/cudastage/sched"
	"github.com/imgpipe/imgpipe/stages"
)

func TestPack(t *testing.T) {
	shapes := []BatchImage{{W: 17, H: 9, C: 3}, {W: 1, H: 1, C: 1, Off: 999, Stride: 5}, {W: 33, H: 65, C: 1}}
	got, size, err := Pack(shapes, 256)
	if err != nil {
		t.Fatal(err)
	}
	want := []BatchImage{
		{W: 17, H: 9, C: 3, Off: 0, Stride: 51},
		{W: 1, H: 1, C: 1, Off: 512, Stride: 1}, // 459 bytes rounded up to 512
		{W: 33, H: 65, C: 1, Off: 768, Stride: 33},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d placements", len(got))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("image %d: %+v, want %+v", i, got[i], want[i])
		}
	}
	if size != 768+33*65 {
		t.Errorf("size %d, want %d", size, 768+33*65)
	}
	if _, n, err := Pack(nil, 16); err != nil || n != 0 {
		t.Errorf("Pack(nil) = %d, %v", n, err)
	}

	errs := []struct {
		name   string
		shapes []BatchImage
		align  int
		err    string
	}{
		{"align 0", shapes, 0, "alignment 0"},
		{"align 24", shapes, 24, "alignment 24"},
		{"two channels", []BatchImage{{W: 1, H: 1, C: 2}}, 16, "image 0: 2 channels"},
		{"empty", []BatchImage{{W: 3, H: 3, C: 1}, {W: 0, H: 3, C: 1}}, 16, "image 1: size 0x3"},
		{"negative", []BatchImage{{W: 3, H: -3, C: 1}}, 16, "size 3x-3"},
		{"too big", []BatchImage{{W: 1 << 15, H: 1 << 15, C: 3}}, 16, "over 1073741824 bytes"},
		{"too many", make([]BatchImage, MaxBatchImages+1), 16, "at most 65536"},
	}
	for _, tc := range errs {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := Pack(tc.shapes, tc.align)
			checkErr(t, err, tc.err)
		})
	}
}

func TestOutputs(t *testing.T) {
	src, _, err := Pack([]BatchImage{{W: 20, H: 10, C: 3}, {W: 5, H: 7, C: 1}}, 16)
	if err != nil {
		t.Fatal(err)
	}
	gray, n, err := Outputs(opOf("grayscale"), src, 16)
	if err != nil {
		t.Fatal(err)
	}
	if gray[0] != (BatchImage{W: 20, H: 10, C: 1, Off: 0, Stride: 20}) || gray[1] != (BatchImage{W: 5, H: 7, C: 1, Off: 208, Stride: 5}) || n != 243 {
		t.Errorf("grayscale outputs %+v, size %d", gray, n)
	}
	tr, _, err := Outputs(opOf("transpose"), src, 16)
	if err != nil {
		t.Fatal(err)
	}
	if tr[0] != (BatchImage{W: 10, H: 20, C: 3, Off: 0, Stride: 30}) || tr[1] != (BatchImage{W: 7, H: 5, C: 1, Off: 608, Stride: 7}) {
		t.Errorf("transpose outputs %+v", tr)
	}
	hist, n, err := Outputs(opOf("histogram"), src, 16)
	if err != nil {
		t.Fatal(err)
	}
	if hist[0].Off != 0 || hist[1].Off != sched.HistBytes || n != 2*sched.HistBytes {
		t.Errorf("histogram outputs %+v, size %d", hist, n)
	}
	// Chaining: the outputs of one op are a valid batch for the next.
	b := Batch{Op: opOf("transpose"), Src: gray}
	if b.Dst, _, err = Outputs(b.Op, b.Src, 16); err != nil {
		t.Fatal(err)
	}
	if err := b.Check(); err != nil {
		t.Errorf("chained batch: %v", err)
	}
}

// testBatch is a valid mixed batch for op, packed with alignment 16.
func testBatch(t *testing.T, op sched.Op) *Batch {
	t.Helper()
	src, _, err := Pack([]BatchImage{{W: 17, H: 9, C: 3}, {W: 1, H: 1, C: 1}, {W: 300, H: 70, C: 1}, {W: 65, H: 33, C: 3}}, 16)
	if err != nil {
		t.Fatal(err)
	}
	dst, _, err := Outputs(op, src, 16)
	if err != nil {
		t.Fatal(err)
	}
	return &Batch{Op: op, Src: src, Dst: dst}
}

func TestBatchCheck(t *testing.T) {
	tests := []struct {
		name string
		op   sched.Op
		edit func(b *Batch)
		err  string
	}{
		{"valid grayscale", opOf("grayscale"), func(*Batch) {}, ""},
		{"valid blur", opOf("blur sigma=4"), func(*Batch) {}, ""},
		{"valid histogram", opOf("histogram"), func(*Batch) {}, ""},
		{"empty batch", opOf("grayscale"), func(b *Batch) { b.Src, b.Dst = nil, nil }, ""},
		{"padded strides", opOf("transpose"), func(b *Batch) {
			b.Src[3].Stride += 5
			b.Src[3].Off += 3
			b.Dst[3].Stride += 7
			b.Dst[3].Off = 1 << 20
		}, ""},
		{"bad op", sched.Op{Name: "boxblur", Args: stages.BoxBlurArgs{Radius: 20}}, func(*Batch) {}, "radius 20"},
		{"count mismatch", opOf("grayscale"), func(b *Batch) { b.Dst = b.Dst[:3] }, "4 sources but 3 destinations"},
		{"source channels", opOf("grayscale"), func(b *Batch) { b.Src[1].C = 4 }, "source 1: 4 channels"},
		{"source stride", opOf("grayscale"), func(b *Batch) { b.Src[0].Stride = 50 }, "source 0: stride 50 is less than width×channels 51"},
		{"source huge stride", opOf("grayscale"), func(b *Batch) { b.Src[0].Stride = 1 << 31 }, "does not fit in 32 bits"},
		{"source offset", opOf("grayscale"), func(b *Batch) { b.Src[2].Off = 1<<63 - 10 }, "source 2: offset"},
		{"destination shape", opOf("grayscale"), func(b *Batch) { b.Dst[0].C = 3 }, "destination 0 is 17x9x3, want 17x9x1"},
		{"transpose shape", opOf("transpose"), func(b *Batch) { b.Dst[3].W, b.Dst[3].H = 65, 33 }, "destination 3 is 65x33x3, want 33x65x3"},
		{"destination stride", opOf("blur sigma=1"), func(b *Batch) { b.Dst[2].Stride = 299 }, "destination 2: stride 299"},
		{"destinations overlap", opOf("grayscale"), func(b *Batch) { b.Dst[3].Off = b.Dst[2].Off + 100 }, "destinations 2 and 3 overlap"},
		{"destination in padding", opOf("grayscale"), func(b *Batch) {
			b.Dst[2].Stride = 400
			b.Dst[1].Off = b.Dst[2].Off + 300
		}, "destinations 1 and 2 overlap"},
		{"histogram alignment", opOf("histogram"), func(b *Batch) { b.Dst[1].Off = 4 }, "counts 1 at offset 4"},
		{"histograms overlap", opOf("histogram"), func(b *Batch) { b.Dst[2].Off = b.Dst[1].Off + 8 }, "destinations 1 and 2 overlap"},
		{"too many", opOf("histogram"), func(b *Batch) {
			b.Src = make([]BatchImage, MaxBatchImages+1)
			b.Dst = make([]BatchImage, MaxBatchImages+1)
		}, "65537 images"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := testBatch(t, tc.op)
			tc.edit(b)
			checkErr(t, b.Check(), tc.err)
			if tc.err != "" {
				if err := b.EncodeTable(make([]byte, 1<<20)); err == nil {
					t.Error("EncodeTable accepted an invalid batch")
				}
			}
		})
	}
}

// decodeTable reads back the entries EncodeTable wrote.
func decodeTable(buf []byte) []entry {
	var es []entry
	le := binary.LittleEndian
	for ; len(buf) >= kImgBytes; buf = buf[kImgBytes:] {
		i32 := func(o int) int32 { return int32(le.Uint32(buf[o:])) }
		es = append(es, entry{
			srcOff: le.Uint64(buf[0:]), dstOff: le.Uint64(buf[8:]),
			w: i32(16), h: i32(20), c: i32(24), srcStride: i32(28), dstStride: i32(32),
			block0: i32(36), tilesX: i32(40), reserve: i32(44),
		})
	}
	return es
}

// tiling is how one kernel's block spends its tile (see the kernel's comment
// in kernels/<stage>.cu), modelled independently of the launchers' tiles
// functions: work calls mark for every destination sample of image e that
// block tile writes. samples is set when a row counts w·c samples (the
// separable passes) rather than w pixels.
type tiling struct {
	samples bool
	work    func(e entry, tile int, mark func(x, y int))
}

// rowGroups is the tiling of grayscale and histogram: a tile is per groups of
// kGrayPixels pixels of a row, counted row after row.
func rowGroups(per int) func(e entry, tile int, mark func(x, y int)) {
	return func(e entry, tile int, mark func(x, y int)) {
		w, h, tx := int(e.w), int(e.h), int(e.tilesX)
		for g := tile * per; g < (tile+1)*per && g < tx*h; g++ {
			y, x0 := g/tx, (g%tx)*kGrayPixels
			for x := x0; x < min(x0+kGrayPixels, w); x++ {
				mark(x, y)
			}
		}
	}
}

// rect is a tiling of tw×th rectangles, tiles_x of them across a row of
// width samples.
func rect(e entry, tile, tw, th, width int, mark func(x, y int)) {
	tx := int(e.tilesX)
	x0, y0 := (tile%tx)*tw, (tile/tx)*th
	for y := y0; y < min(y0+th, int(e.h)); y++ {
		for x := x0; x < min(x0+tw, width); x++ {
			mark(x, y)
		}
	}
}

// tilings are the models of every kernel a launcher launches, by kernel name.
// Each op's own test file adds its kernels' models from init, beside its
// launcher, so that TestLaunchTables checks every registered launcher with no
// list here.
var tilings = map[string]tiling{}

// covered simulates one pass of a kernel on the CPU at the level of its
// tiling: every block finds its image as the kernel does (the last entry with
// block0 <= block), then marks the destination samples its tile writes. Each
// sample of each image must be written exactly once, and every block must
// have work (no wasted blocks).
func covered(t *testing.T, kernel string, es []entry, blocks int) {
	t.Helper()
	model, ok := tilings[kernel]
	if !ok {
		t.Fatalf("no tiling model for kernel %s: add one to tilings in its op's test file", kernel)
	}
	type key struct{ img, x, y int } // x counts samples (bytes or uint16) of a row
	seen := map[key]int{}
	for b := 0; b < blocks; b++ {
		lo, hi := 0, len(es)-1
		for lo < hi {
			mid := (lo + hi + 1) / 2
			if int(es[mid].block0) <= b {
				lo = mid
			} else {
				hi = mid - 1
			}
		}
		e := es[lo]
		tile := b - int(e.block0)
		work := 0
		model.work(e, tile, func(x, y int) {
			seen[key{lo, x, y}]++
			work++
		})
		if work == 0 {
			t.Errorf("%s: block %d (image %d, tile %d) has no work", kernel, b, lo, tile)
		}
	}
	for i, e := range es {
		w := int(e.w)
		if model.samples {
			w *= int(e.c)
		}
		for y := 0; y < int(e.h); y++ {
			for x := 0; x < w; x++ {
				if n := seen[key{i, x, y}]; n != 1 {
					t.Fatalf("%s: image %d sample (%d,%d) written %d times", kernel, i, x, y, n)
				}
			}
		}
	}
}

// TestLaunchTables encodes the tables of every registered stage's op for a
// mixed batch, checks each entry against the batch, and simulates the
// kernels' tiling over them.
func TestLaunchTables(t *testing.T) {
	shapes := []BatchImage{
		{W: 1, H: 1, C: 1}, {W: 1, H: 1, C: 3}, {W: 1, H: 300, C: 3}, {W: 300, H: 1, C: 1}, {W: 17, H: 9, C: 3},
		{W: 33, H: 65, C: 1}, {W: 129, H: 33, C: 1}, {W: 1025, H: 3, C: 3}, {W: 200, H: 130, C: 3},
	}
	src, _, err := Pack(shapes, 256)
	if err != nil {
		t.Fatal(err)
	}
	// Every stage with a launcher, with its test spec (stageSpec).
	for _, name := range fatbinStages() {
		spec := stageSpec(name)
		var op sched.Op
		if launchers[name].encode != "" {
			op = pngTestOp() // an encoder's op is made by the planner, not from a spec
		} else {
			op = opOf(spec)
		}
		t.Run(op.String(), func(t *testing.T) {
			b := &Batch{Op: op, Src: src}
			if b.Dst, _, err = Outputs(op, src, 256); err != nil {
				t.Fatal(err)
			}
			buf := make([]byte, TableBytes(op, len(src))+7)
			for i := range buf {
				buf[i] = 0xee
			}
			if err := b.EncodeTable(buf); err != nil {
				t.Fatal(err)
			}
			for _, v := range buf[len(buf)-7:] {
				if v != 0xee {
					t.Fatal("EncodeTable wrote past TableBytes")
				}
			}
			launches, err := b.plan()
			if err != nil {
				t.Fatal(err)
			}
			entryBytes := len(launches) * len(src) * kImgBytes
			if l := launchers[op.Name]; entryBytes+len(src)*l.extra != TableBytes(op, len(src)) {
				t.Fatalf("TableBytes %d, want %d entries and %d extra records", TableBytes(op, len(src)), entryBytes/kImgBytes, len(src))
			}
			es := decodeTable(buf[:entryBytes])
			if len(es) != len(launches)*len(src) {
				t.Fatalf("%d entries for %d launches", len(es), len(launches))
			}
			if want := launchers[op.Name].passes; len(launches) != len(want) {
				t.Fatalf("%d launches for the launcher's %d passes", len(launches), len(want))
			}
			tmp, _ := b.ScratchLayout()
			for pi, p := range launches {
				if p.kernel != launchers[op.Name].passes[pi].kernel {
					t.Errorf("launch %d runs %s, the launcher's pass %d is %s", pi, p.kernel, pi, launchers[op.Name].passes[pi].kernel)
				}
				part := es[pi*len(src) : (pi+1)*len(src)]
				from, to := b.Src, b.Dst
				switch p.dst {
				case roleScratch:
					to = tmp
				}
				if p.src == roleScratch {
					from = tmp
				}
				total, units := 0, int64(0)
				for i, e := range part {
					s, d := from[i], to[i]
					if e.srcOff != s.Off || e.dstOff != d.Off || int(e.srcStride) != s.Stride || int(e.dstStride) != d.Stride ||
						int(e.w) != s.W || int(e.h) != s.H || int(e.c) != s.C || int64(e.reserve) != units {
						t.Errorf("pass %d entry %d = %+v, source %+v, destination %+v", pi, i, e, s, d)
					}
					if int(e.block0) != total {
						t.Errorf("pass %d entry %d: block0 %d, want %d", pi, i, e.block0, total)
					}
					if p.units != nil {
						units += p.units(int64(s.W), int64(s.H), int64(s.C))
					}
					ts := s
					if p.byDst {
						ts = d
					}
					n, tx := p.tiles(int64(ts.W), int64(ts.H), int64(ts.C))
					if int64(e.tilesX) != tx {
						t.Errorf("pass %d entry %d: tiles_x %d, want %d", pi, i, e.tilesX, tx)
					}
					total += int(n)
				}
				if total != p.blocks {
					t.Errorf("pass %d: %d blocks, entries add up to %d", pi, p.blocks, total)
				}
				if p.byDst { // the model counts over the destination's pixels
					part = slices.Clone(part)
					for i := range part {
						part[i].w, part[i].h = int32(to[i].W), int32(to[i].H)
					}
				}
				covered(t, p.kernel, part, p.blocks)
			}
		})
	}
	launched := map[string]bool{}
	for _, l := range launchers {
		for _, p := range l.passes {
			launched[p.kernel] = true
		}
	}
	for k := range tilings {
		if !launched[k] {
			t.Errorf("a tiling model for kernel %s, which no launcher launches", k)
		}
	}
	hist, _, _ := Outputs(opOf("histogram"), src, 256)
	if err := (&Batch{Op: opOf("histogram"), Src: src, Dst: hist}).EncodeTable(make([]byte, 10)); err == nil ||
		!strings.Contains(err.Error(), "table buffer is 10 bytes, need 432") {
		t.Errorf("short table buffer: %v", err)
	}
}

func TestScratchLayout(t *testing.T) {
	b := testBatch(t, opOf("boxblur radius=3"))
	tmp, size := b.ScratchLayout()
	var pixels uint64
	var end uint64
	for i, s := range b.Src {
		d := tmp[i]
		if d.W != s.W || d.H != s.H || d.C != s.C || d.Stride != 2*s.W*s.C || d.Off%ScratchAlign != 0 || d.Off < end {
			t.Errorf("scratch %d = %+v for source %+v (previous end %d)", i, d, s, end)
		}
		end = d.Off + uint64(d.Stride*d.H)
		pixels += uint64(s.W * s.H * s.C)
	}
	if size != end || size > MaxScratchBytes(b.Op, pixels, len(b.Src)) {
		t.Errorf("scratch size %d, end %d, bound %d", size, end, MaxScratchBytes(b.Op, pixels, len(b.Src)))
	}
	if n := testBatch(t, opOf("transpose")).ScratchBytes(); n != 0 {
		t.Errorf("transpose needs %d scratch bytes", n)
	}
	if MaxScratchBytes(opOf("grayscale"), 1000, 3) != 0 {
		t.Error("grayscale scratch bound is not 0")
	}
}

func TestBuffersCheck(t *testing.T) {
	blur := testBatch(t, opOf("blur sigma=2"))
	gray := testBatch(t, opOf("grayscale"))
	scratch := blur.ScratchBytes()
	tests := []struct {
		name string
		b    *Batch
		buf  Buffers
		err  string
	}{
		{"valid", blur, Buffers{Src: 1 << 20, Dst: 2 << 20, Scratch: 3 << 20, Table: 4 << 20}, ""},
		{"valid without scratch", gray, Buffers{Src: 1 << 20, Dst: 2 << 20, Table: 4 << 20}, ""},
		{"no source", gray, Buffers{Dst: 2 << 20, Table: 4 << 20}, "pointers must be set"},
		{"no table", gray, Buffers{Src: 1 << 20, Dst: 2 << 20}, "pointers must be set"},
		{"no scratch", blur, Buffers{Src: 1 << 20, Dst: 2 << 20, Table: 4 << 20}, "needs"},
		{"in place", gray, Buffers{Src: 1 << 20, Dst: 1 << 20, Table: 4 << 20}, "source buffer overlaps the destination buffer"},
		{"destination over table", gray, Buffers{Src: 1 << 20, Dst: 4<<20 - 100, Table: 4 << 20}, "destination buffer overlaps the table buffer"},
		{"scratch over source", blur, Buffers{Src: 1 << 20, Dst: 2 << 20, Scratch: 1<<20 - cuPtr(scratch) + 1, Table: 4 << 20}, "source buffer overlaps the scratch buffer"},
		{"scratch just below source", blur, Buffers{Src: 1 << 20, Dst: 2 << 20, Scratch: 1<<20 - cuPtr(scratch), Table: 4 << 20}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			checkErr(t, tc.buf.check(tc.b, "test"), tc.err)
		})
	}
}

func TestMergeRanges(t *testing.T) {
	got := mergeRanges([]byteRange{{4096, 6144}, {0, 2048}, {2048, 4096}, {8192, 10240}, {9000, 9100}})
	want := []byteRange{{0, 6144}, {8192, 10240}}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("got %v, want %v", got, want)
		}
	}
}

// cuPtr converts a byte count to a device address offset in tests.
func cuPtr(n uint64) cu.DevicePtr { return cu.DevicePtr(n) }
