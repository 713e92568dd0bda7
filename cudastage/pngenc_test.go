package cudastage

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"image"
	"image/png"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/imgpipe/imgpipe/cudastage/cu"
	"github.com/imgpipe/imgpipe/cudastage/sched"
	"github.com/imgpipe/imgpipe/stages"
)

// CPU tests of the PNG encoder's model (pngenc_model_test.go) and of its
// launcher's planning; pngenc_gpu_test.go compares the kernels with the
// model.

// pngShape is a test image's geometry.
type pngShape struct{ w, h, c int }

// pngTestShapes are the sizes every encoder test covers: the smallest, one
// row or column, odd sizes, C = 1 and 3, filtered lengths n = h·(1+w·c) of
// exactly one block (65536), one block and a byte (65537), two blocks
// (131072), and a photo size of many blocks.
var pngTestShapes = []pngShape{
	{1, 1, 1}, {1, 1, 3}, {1, 300, 1}, {300, 1, 3}, {17, 9, 3}, {33, 65, 1},
	{255, 256, 1},  // n = 65536
	{65536, 1, 1},  // n = 65537
	{85, 512, 3},   // n = 131072
	{32767, 2, 1},  // n = 65536, two rows
	{640, 480, 3},  // 15 blocks
	{1, 40000, 1},  // n = 80000, rows of 2 bytes
	{401, 333, 1},  // odd, three blocks
	{129, 1000, 3}, // a block boundary in the middle of a pixel
	{28654, 1, 1},  // one skewed cycle exactly: the limit of §3 acts (TestPNGSkewedNeedsLimit)
}

// pngKinds are the test contents: random bytes (every symbol, about 8 bits
// each), a smooth photo-like image (small filtered values), filtered bytes
// with Fibonacci frequencies (the 15-bit limit of §3 must act), and a flat
// image (a code of two or three symbols).
var pngKinds = []string{"random", "smooth", "skewed", "flat"}

// pngTestImage returns a tightly packed w×h×c image of the kind.
func pngTestImage(kind string, s pngShape, seed uint64) []byte {
	rng := rand.New(rand.NewPCG(seed, uint64(s.w*s.h*s.c)))
	pix := make([]byte, s.w*s.h*s.c)
	switch kind {
	case "random":
		for i := range pix {
			pix[i] = byte(rng.Uint32())
		}
	case "smooth":
		for y := range s.h {
			for x := range s.w {
				for ch := range s.c {
					v := 128 + 60*sinApprox(float64(x)/37+float64(ch)) + 50*sinApprox(float64(y)/23) + float64(rng.IntN(5))
					pix[(y*s.w+x)*s.c+ch] = byte(min(max(v, 0), 255))
				}
			}
		}
	case "skewed":
		// Cycles of filtered bytes whose counts, with the end of block and
		// one row's filter byte, are Fibonacci numbers 1, 1, 2, 3, 5, ...
		// (values 100, the end of block, 1, 102, 103, ...): the Huffman tree
		// is a chain 21 deep. Each cycle is shuffled on its own; the pixels
		// integrate the wanted filtered bytes.
		cycle := []byte{100, 1}
		a, b := 3, 5
		for sym := 2; sym < 20; sym++ {
			for range a {
				cycle = append(cycle, byte(100+sym))
			}
			a, b = b, a+b
		}
		var seq []byte
		for len(seq) < s.w*s.h*s.c {
			rng.Shuffle(len(cycle), func(i, j int) { cycle[i], cycle[j] = cycle[j], cycle[i] })
			seq = append(seq, cycle...)
		}
		k := 0
		for y := range s.h {
			row := pix[y*s.w*s.c : (y+1)*s.w*s.c]
			for i := range row {
				var left byte
				if i >= s.c {
					left = row[i-s.c]
				}
				row[i] = left + seq[k]
				k++
			}
		}
	case "flat":
		for i := range pix {
			pix[i] = 77
		}
	default:
		panic("unknown kind " + kind)
	}
	return pix
}

// sinApprox is a smooth periodic function in [-1, 1] (a parabola wave), so
// that test images need no floating-point library behaviour to be stable.
func sinApprox(x float64) float64 {
	t := x/6.283185307179586 - float64(int64(x/6.283185307179586))
	if t < 0 {
		t++
	}
	if t < 0.5 {
		return 16 * t * (0.5 - t)
	}
	return -16 * (t - 0.5) * (1 - t)
}

// TestPNGModelDecodes checks the model against the standard library's
// decoder (which verifies every CRC-32 and the Adler-32): every shape and
// kind decodes to its pixels, with one IDAT chunk per block, within the
// GPU encoder's bound.
func TestPNGModelDecodes(t *testing.T) {
	for _, s := range pngTestShapes {
		for _, kind := range pngKinds {
			t.Run(fmt.Sprintf("%dx%dx%d-%s", s.w, s.h, s.c, kind), func(t *testing.T) {
				pix := pngTestImage(kind, s, 1)
				enc := modelEncode(pix, s.w, s.h, s.c)
				if bound := pngFileBound(int64(s.w), int64(s.h), int64(s.c)); int64(len(enc)) > bound {
					t.Errorf("%d bytes, over the bound %d", len(enc), bound)
				}
				m, err := png.Decode(bytes.NewReader(enc))
				if err != nil {
					t.Fatal(err)
				}
				if got := pixelsOf(t, m, s.c); !bytes.Equal(got, pix) {
					t.Fatal("decoded pixels differ from the image")
				}
				if n, want := countChunks(t, enc, "IDAT"), pngBlocks(int64(s.w), int64(s.h), int64(s.c)); int64(n) != want {
					t.Errorf("%d IDAT chunks, want %d", n, want)
				}
			})
		}
	}
}

// pixelsOf returns a decoded image's samples, tightly packed with c channels.
func pixelsOf(t *testing.T, m image.Image, c int) []byte {
	t.Helper()
	switch m := m.(type) {
	case *image.Gray:
		if c == 1 {
			return packRows(m.Pix, m.Stride, m.Rect.Dx(), m.Rect.Dy())
		}
	case *image.RGBA:
		if c == 3 {
			var out []byte
			for y := range m.Rect.Dy() {
				for x := range m.Rect.Dx() {
					p := m.Pix[y*m.Stride+4*x:]
					out = append(out, p[0], p[1], p[2])
				}
			}
			return out
		}
	}
	t.Fatalf("decoded a %T for %d channels", m, c)
	return nil
}

func packRows(pix []byte, stride, w, h int) []byte {
	var out []byte
	for y := range h {
		out = append(out, pix[y*stride:y*stride+w]...)
	}
	return out
}

// countChunks walks a PNG's chunks and counts those of the type.
func countChunks(t *testing.T, enc []byte, typ string) int {
	t.Helper()
	n := 0
	for p := 8; p < len(enc); {
		if p+12 > len(enc) {
			t.Fatalf("truncated chunk at %d", p)
		}
		l := int(binary.BigEndian.Uint32(enc[p:]))
		if string(enc[p+4:p+8]) == typ {
			n++
		}
		p += 12 + l
	}
	return n
}

// TestModelLengths checks Lengths of §3 on counts worked out by hand: the
// two-queue tie rule (A's head on equal weights), the limit (Adjust) and the
// assignment order (f descending, s ascending); and on many random counts
// that the code is complete and within the limit.
func TestModelLengths(t *testing.T) {
	tests := []struct {
		f     []int
		limit int
		want  []int
	}{
		{[]int{5, 0, 1, 1}, 15, []int{1, 0, 2, 2}},
		{[]int{1, 1, 1, 1}, 15, []int{2, 2, 2, 2}},
		{[]int{2, 1, 1}, 15, []int{1, 2, 2}}, // the leaf of weight 2 is taken before the node of weight 2
		{[]int{1, 1}, 15, []int{1, 1}},
		// Depths 4,4,3,2,1; the limit moves the two leaves of depth 4 up.
		{[]int{1, 1, 2, 3, 5}, 3, []int{3, 3, 3, 3, 1}},
		{[]int{1, 1, 2, 3, 5}, 15, []int{4, 4, 3, 2, 1}},
		// Equal counts get lengths in symbol order: the shorter code goes to the lower symbol.
		{[]int{3, 1, 1, 1}, 15, []int{1, 2, 3, 3}},
	}
	for _, tc := range tests {
		if got := modelLengths(tc.f, tc.limit); !slices.Equal(got, tc.want) {
			t.Errorf("Lengths(%v, %d) = %v, want %v", tc.f, tc.limit, got, tc.want)
		}
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for range 200 {
		f := make([]int, 257)
		for s := range f {
			if rng.IntN(3) > 0 {
				f[s] = 1 << rng.IntN(16)
			}
		}
		f[256], f[rng.IntN(256)] = 1, 1
		l := modelLengths(f, 15)
		var kraft float64
		for s, n := range l {
			if (n == 0) != (f[s] == 0) || n > 15 {
				t.Fatalf("symbol %d (count %d) has length %d", s, f[s], n)
			}
			if n > 0 {
				kraft += 1 / float64(uint64(1)<<n)
			}
		}
		if kraft != 1 {
			t.Fatalf("Kraft sum %v for %v", kraft, f)
		}
	}
}

// TestModelCanonical is RFC 1951's example of §3.2.2.
func TestModelCanonical(t *testing.T) {
	got := modelCanonical([]int{3, 3, 3, 3, 3, 2, 4, 4})
	want := []uint32{0b010, 0b011, 0b100, 0b101, 0b110, 0b00, 0b1110, 0b1111}
	if !slices.Equal(got, want) {
		t.Errorf("canonical codes %b, want %b", got, want)
	}
}

// TestPNGCRCTables checks the CRC tables the kernels get: shifting a CRC past
// len(b) bytes with x2n and combining gives the CRC of the concatenation
// (zlib's crc32_combine), for lengths up to a few MB.
func TestPNGCRCTables(t *testing.T) {
	if pngCRC.Table != *crc32.IEEETable {
		t.Fatal("the byte table is not CRC-32 (IEEE)")
	}
	x8n := func(n uint64) uint32 { // the kernels' x8n
		p := uint32(1) << 31
		for k := 3; n != 0; n, k = n>>1, k+1 {
			if n&1 != 0 {
				p = crcMulModP(pngCRC.X2n[k&31], p)
			}
		}
		return p
	}
	rng := rand.New(rand.NewPCG(5, 6))
	for _, n := range []int{0, 1, 3, 4, 255, 256, 65536, 123457, 3 << 20} {
		a, b := make([]byte, rng.IntN(100)), make([]byte, n)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		for i := range a {
			a[i] = byte(rng.Uint32())
		}
		want := crc32.ChecksumIEEE(append(slices.Clone(a), b...))
		if got := crcMulModP(x8n(uint64(n)), crc32.ChecksumIEEE(a)) ^ crc32.ChecksumIEEE(b); got != want {
			t.Errorf("combine over %d bytes: %08x, want %08x", n, got, want)
		}
	}
}

// TestPNGConstants checks the sizes the kernels rely on: the staged bit
// stream of a full block holds §6's bound in whole words, and a block record
// is what the kernel's static_assert says.
func TestPNGConstants(t *testing.T) {
	words := ceilDiv(pngHeaderBits+15*(kPngBlock+1), 32)
	if want := int64(alignUp(uint64(4*words), 16)); kPngStageBytes != want {
		t.Errorf("kPngStageBytes = %d, want %d", kPngStageBytes, want)
	}
	if pngHeaderBits != 3686 {
		t.Errorf("header bound %d bits, the kernel keeps 116 words", pngHeaderBits)
	}
	// A 1 GiB image's file length fits the uint32 of OpCall.Lens.
	if b := pngFileBound(MaxImageBytes, 1, 1); b > 1<<32-1 {
		t.Errorf("bound %d of the largest image does not fit in 32 bits", b)
	}
	for _, tc := range []struct{ w, h, c, blocks int64 }{
		{1, 1, 1, 1}, {255, 256, 1, 1}, {65536, 1, 1, 2}, {85, 512, 3, 2}, {85, 513, 3, 3},
	} {
		if nb := pngBlocks(tc.w, tc.h, tc.c); nb != tc.blocks {
			t.Errorf("pngBlocks(%d, %d, %d) = %d, want %d", tc.w, tc.h, tc.c, nb, tc.blocks)
		}
	}
}

// TestPNGLauncherFor checks which ops the encoder's launcher takes.
func TestPNGLauncherFor(t *testing.T) {
	good := pngTestOp()
	withEnc := func(f func(e *sched.EncodeOp)) sched.Op {
		op := pngTestOp()
		e := *op.Encode
		f(&e)
		op.Encode = &e
		return op
	}
	gray := opOf("grayscale")
	gray.Encode = good.Encode
	args := pngTestOp()
	args.Args = stages.BoxBlurArgs{Radius: 3}
	hist := pngTestOp()
	hist.Hist = true
	tests := []struct {
		name string
		op   sched.Op
		err  string
	}{
		{"png-fast", good, ""},
		{"no encoding", sched.Op{Name: "save", Spec: "save format=png"}, "the GPU save kernels encode files, but the op has no encoding"},
		{"jpeg", withEnc(func(e *sched.EncodeOp) { e.Format = "jpeg" }), `format "jpeg" has no GPU encoder (the GPU encodes png-fast)`},
		{"png level 6", withEnc(func(e *sched.EncodeOp) { e.Format = "png" }), `format "png" has no GPU encoder`},
		{"no bound", withEnc(func(e *sched.EncodeOp) { e.Bound = nil }), "needs a Bound"},
		{"histogram", hist, "cannot be a histogram"},
		{"pixel stage with an encoding", gray, "stage grayscale has no GPU encoder"},
		{"arguments", args, "takes no launch arguments, got stages.BoxBlurArgs"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := launcherFor(tc.op)
			checkErr(t, err, tc.err)
			var d *Device
			checkErr(t, d.CheckOp(tc.op), tc.err)
		})
	}
}

// pngTestBatch is an encoding batch of the shapes, sources and files packed
// with the alignment.
func pngTestBatch(t testing.TB, op sched.Op, shapes []pngShape, align int) (*Batch, uint64, uint64) {
	t.Helper()
	in := make([]BatchImage, len(shapes))
	for i, s := range shapes {
		in[i] = BatchImage{W: s.w, H: s.h, C: s.c}
	}
	src, srcSize, err := Pack(in, align)
	if err != nil {
		t.Fatal(err)
	}
	dst, dstSize, err := Outputs(op, src, align)
	if err != nil {
		t.Fatal(err)
	}
	return &Batch{Op: op, Src: src, Dst: dst}, srcSize, dstSize
}

// TestPNGPlan checks the encoder's batch planning: block counts in the
// tables, the scratch size against its bound (worst case: one-pixel-wide
// gray images, whose filtered stream is twice their pixels), the files'
// room, and the buffers.
func TestPNGPlan(t *testing.T) {
	op := pngTestOp()
	b, _, _ := pngTestBatch(t, op, pngTestShapes, 1)
	if err := b.Check(); err != nil {
		t.Fatal(err)
	}
	var nb uint64
	for _, s := range pngTestShapes {
		nb += uint64(pngBlocks(int64(s.w), int64(s.h), int64(s.c)))
	}
	if got, want := b.ScratchBytes(), nb*(kPngRecBytes+kPngStageBytes); got != want {
		t.Errorf("scratch %d bytes, want %d", got, want)
	}
	for _, shapes := range [][]pngShape{pngTestShapes, {{1, 1 << 20, 1}, {1, 1, 1}}, slices.Repeat([]pngShape{{1, 32768, 1}}, 5)} {
		b, _, _ := pngTestBatch(t, op, shapes, 1)
		var pixels uint64
		for _, s := range shapes {
			pixels += uint64(s.w * s.h * s.c)
		}
		if got, bound := b.ScratchBytes(), MaxScratchBytes(op, pixels, len(shapes)); got > bound {
			t.Errorf("%v: scratch %d over its bound %d", shapes, got, bound)
		}
	}
	if got := TableBytes(op, 3); got != 3*3*kImgBytes {
		t.Errorf("TableBytes = %d, want three passes of entries", got)
	}

	small := pngTestOp()
	small.Encode.Bound = func(in sched.Shape) int { return int(pngFileBound(int64(in.W), int64(in.H), int64(in.C))) - 1 }
	tight, _, _ := pngTestBatch(t, small, pngTestShapes[:2], 16)
	checkErr(t, tight.Check(), "png-fast's bound gives a 1x1x1 image 530 bytes, the GPU encoder may write 531")
	overlap, _, _ := pngTestBatch(t, op, pngTestShapes[:3], 16)
	overlap.Dst[2].Off = overlap.Dst[1].Off + 10
	checkErr(t, overlap.Check(), "destinations 1 and 2 overlap")
	short, _, _ := pngTestBatch(t, op, pngTestShapes[:2], 16)
	short.Dst = short.Dst[:1]
	checkErr(t, short.Check(), "2 sources but 1 destinations")

	small2, _, _ := pngTestBatch(t, op, pngTestShapes[:3], 16)
	scratch := cu.DevicePtr(small2.ScratchBytes())
	tests := []struct {
		name string
		buf  Buffers
		err  string
	}{
		{"valid", Buffers{Src: 1 << 20, Dst: 2 << 20, Scratch: 1 << 30, Table: 4 << 20, Lens: 5 << 20}, ""},
		{"no lengths", Buffers{Src: 1 << 20, Dst: 2 << 20, Scratch: 1 << 30, Table: 4 << 20}, "needs a lengths buffer"},
		{"no scratch", Buffers{Src: 1 << 20, Dst: 2 << 20, Table: 4 << 20, Lens: 5 << 20}, "bytes of scratch, none given"},
		{"unaligned scratch", Buffers{Src: 1 << 20, Dst: 2 << 20, Scratch: 1<<30 + 8, Table: 4 << 20, Lens: 5 << 20}, "not aligned to 16 bytes"},
		{"lengths in a file", Buffers{Src: 1 << 20, Dst: 2 << 20, Scratch: 1 << 30, Table: 4 << 20, Lens: 2<<20 + 4}, "destination buffer overlaps the lengths buffer"},
		{"scratch over the source", Buffers{Src: 1 << 30, Dst: 2 << 20, Scratch: 1<<30 - scratch + 16, Table: 4 << 20, Lens: 5 << 20}, "source buffer overlaps the scratch buffer"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			checkErr(t, tc.buf.check(small2, "save"), tc.err)
		})
	}
}

// TestPNGBatchOf checks that the executor's encoding call reaches the
// kernels with each file at its DstOff and the lengths pointer.
func TestPNGBatchOf(t *testing.T) {
	op := pngTestOp()
	in := sched.Shape{W: 9, H: 5, C: 3}
	call := &sched.OpCall{Op: op, Images: []sched.OpImage{
		{In: in, Out: in, SrcOff: 0, DstOff: 0},
		{In: in, Out: in, SrcOff: 256, DstOff: 4096},
	}}
	b := batchOf(call)
	if b.Dst[1].Off != 4096 || b.Src[1].Off != 256 || b.Src[1].Stride != 27 {
		t.Errorf("batchOf placed %+v -> %+v", b.Src, b.Dst)
	}
	if err := b.Check(); err != nil {
		t.Error(err)
	}
	call.Images[1].DstOff = 100 // inside the first file's bound
	checkErr(t, batchOf(call).Check(), "destinations 0 and 1 overlap")
}

// TestPNGSkewedNeedsLimit checks that the skewed test content of one exact
// cycle reaches the limit step of §3 (its Huffman tree is deeper than 15),
// so that the GPU tests exercise it.
func TestPNGSkewedNeedsLimit(t *testing.T) {
	s := pngShape{28654, 1, 1}
	pix := pngTestImage("skewed", s, 1)
	f := make([]int, 257)
	f[256] = 1
	for p := range s.h * (1 + s.w*s.c) {
		y, j := p/(1+s.w*s.c), p%(1+s.w*s.c)
		if j == 0 {
			f[1]++
			continue
		}
		row := pix[y*s.w*s.c:]
		v := row[j-1]
		if j-1 >= s.c {
			v -= row[j-1-s.c]
		}
		f[v]++
	}
	if free, limited := slices.Max(modelLengths(f, 64)), slices.Max(modelLengths(f, 15)); free <= 15 || limited != 15 {
		t.Errorf("longest code %d without the limit, %d with it; want over 15, then 15", free, limited)
	}
}

// The PNG encoder's tiling models (TestLaunchTables): a block's CTA covers
// the samples of its 64 KiB of the filtered stream (the rows' filter bytes
// are no samples); the layout pass has one CTA per image.
func init() {
	tilings["imgpipe_png_plan"] = tiling{samples: true, work: pngTiling}
	tilings["imgpipe_png_pack"] = tiling{samples: true, work: pngTiling}
	tilings["imgpipe_png_layout"] = tiling{samples: true, work: func(e entry, _ int, mark func(x, y int)) {
		rect(e, 0, int(e.w*e.c), int(e.h), int(e.w*e.c), mark)
	}}
}

// pngTiling: block tile of an image's filtered stream, rows of 1 + w·c bytes.
func pngTiling(e entry, tile int, mark func(x, y int)) {
	rowlen := 1 + int(e.w*e.c)
	n := rowlen * int(e.h)
	for p := tile * kPngBlock; p < min((tile+1)*kPngBlock, n); p++ {
		if j := p % rowlen; j > 0 {
			mark(j-1, p/rowlen)
		}
	}
}
