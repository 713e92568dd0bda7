package cudastage

import (
	"encoding/binary"
	"hash/adler32"
	"hash/crc32"
	"sort"

	"github.com/imgpipe/imgpipe/cudastage/sched"
	"github.com/imgpipe/imgpipe/stages"
)

// A straightforward model of docs/png-fast.md, written from the document
// for the tests: slow and literal (explicit tree nodes, bit-by-bit output,
// the standard library's Adler-32 and CRC-32), sharing no code with the
// kernels. The CPU tests check it against image/png and hand-worked codes;
// the GPU tests check the kernels' bytes against it.

// modelBlockBytes is B of §2.
const modelBlockBytes = 65536

// modelEncode is the whole file for a tightly packed w×h×c image.
func modelEncode(pix []byte, w, h, c int) []byte {
	// §1: the filtered stream.
	f := make([]byte, 0, h*(1+w*c))
	for y := range h {
		row := pix[y*w*c : (y+1)*w*c]
		f = append(f, 1)
		for i := range row {
			var left byte
			if i >= c {
				left = row[i-c]
			}
			f = append(f, row[i]-left)
		}
	}
	// §5 with §2: a chunk per block.
	var out []byte
	out = append(out, 0x89, 'P', 'N', 'G', 0x0d, 0x0a, 0x1a, 0x0a)
	ihdr := binary.BigEndian.AppendUint32(nil, uint32(w))
	ihdr = binary.BigEndian.AppendUint32(ihdr, uint32(h))
	color := byte(0)
	if c == 3 {
		color = 2
	}
	ihdr = append(ihdr, 8, color, 0, 0, 0)
	out = modelChunk(out, "IHDR", ihdr)
	for k := 0; k*modelBlockBytes < len(f); k++ {
		blk := f[k*modelBlockBytes : min((k+1)*modelBlockBytes, len(f))]
		final := (k+1)*modelBlockBytes >= len(f)
		var data []byte
		if k == 0 {
			data = append(data, 0x78, 0x01)
		}
		var bw modelBits
		modelDeflateBlock(&bw, blk, final)
		if !final { // an empty stored block: Z_SYNC_FLUSH
			bw.put(0, 1)
			bw.put(0, 2)
			bw.align()
			bw.buf = append(bw.buf, 0, 0, 0xff, 0xff)
		} else {
			bw.align()
		}
		data = append(data, bw.buf...)
		if final {
			data = binary.BigEndian.AppendUint32(data, adler32.Checksum(f))
		}
		out = modelChunk(out, "IDAT", data)
	}
	return modelChunk(out, "IEND", nil)
}

// modelChunk appends a PNG chunk.
func modelChunk(out []byte, typ string, data []byte) []byte {
	out = binary.BigEndian.AppendUint32(out, uint32(len(data)))
	body := append([]byte(typ), data...)
	out = append(out, body...)
	return binary.BigEndian.AppendUint32(out, crc32.ChecksumIEEE(body))
}

// modelBits writes RFC 1951 bit fields, one bit at a time.
type modelBits struct {
	buf  []byte
	nbit int
}

// put writes the n low bits of v, least significant first.
func (b *modelBits) put(v uint32, n int) {
	for i := range n {
		if b.nbit%8 == 0 {
			b.buf = append(b.buf, 0)
		}
		b.buf[len(b.buf)-1] |= byte(v>>i&1) << (b.nbit % 8)
		b.nbit++
	}
}

// code writes a Huffman code of n bits, most significant first.
func (b *modelBits) code(code uint32, n int) {
	for i := n - 1; i >= 0; i-- {
		b.put(code>>i&1, 1)
	}
}

// align pads with zero bits to a byte boundary.
func (b *modelBits) align() { b.nbit = 8 * len(b.buf) }

// modelDeflateBlock writes §3's and §4's block: header, literals, end of
// block.
func modelDeflateBlock(bw *modelBits, blk []byte, final bool) {
	freq := make([]int, 257)
	for _, x := range blk {
		freq[x]++
	}
	freq[256] = 1
	lit := modelLengths(freq, 15)
	litCode := modelCanonical(lit)

	seq := append(append([]int(nil), lit...), 0) // and one distance length 0
	type rl struct{ sym, extra, bits int }
	var syms []rl
	for i := 0; i < len(seq); {
		if seq[i] != 0 {
			syms = append(syms, rl{seq[i], 0, 0})
			i++
			continue
		}
		r := 0
		for i+r < len(seq) && seq[i+r] == 0 {
			r++
		}
		i += r
		for r >= 11 {
			e := min(r, 138)
			syms = append(syms, rl{18, e - 11, 7})
			r -= e
		}
		if r >= 3 {
			syms = append(syms, rl{17, r - 3, 3})
			r = 0
		}
		for ; r > 0; r-- {
			syms = append(syms, rl{0, 0, 0})
		}
	}
	g := make([]int, 19)
	for _, s := range syms {
		g[s.sym]++
	}
	cl := modelLengths(g, 7)
	clCode := modelCanonical(cl)

	fin := uint32(0)
	if final {
		fin = 1
	}
	bw.put(fin, 1)
	bw.put(2, 2)
	bw.put(0, 5)
	bw.put(0, 5)
	order := []int{16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1, 15}
	ncl := 4
	for i, s := range order {
		if cl[s] != 0 {
			ncl = max(ncl, i+1)
		}
	}
	bw.put(uint32(ncl-4), 4)
	for _, s := range order[:ncl] {
		bw.put(uint32(cl[s]), 3)
	}
	for _, s := range syms {
		bw.code(clCode[s.sym], cl[s.sym])
		bw.put(uint32(s.extra), s.bits)
	}
	for _, x := range blk {
		bw.code(litCode[x], lit[x])
	}
	bw.code(litCode[256], lit[256])
}

// modelNode is a node of the Huffman tree of §3.
type modelNode struct {
	w           int
	sym         int // -1 for an internal node
	left, right *modelNode
}

// modelLengths is Lengths(f, len(f), limit) of §3.
func modelLengths(f []int, limit int) []int {
	var leaves []*modelNode
	for s, n := range f {
		if n > 0 {
			leaves = append(leaves, &modelNode{w: n, sym: s})
		}
	}
	sort.SliceStable(leaves, func(i, j int) bool { return leaves[i].w < leaves[j].w }) // s ascending within
	a := append([]*modelNode(nil), leaves...)
	var b []*modelNode
	pop := func() *modelNode {
		var n *modelNode
		if len(a) > 0 && (len(b) == 0 || a[0].w <= b[0].w) {
			n, a = a[0], a[1:]
		} else {
			n, b = b[0], b[1:]
		}
		return n
	}
	for len(a)+len(b) > 1 {
		x := pop()
		y := pop()
		b = append(b, &modelNode{w: x.w + y.w, sym: -1, left: x, right: y})
	}
	bl := make([]int, len(f)+2)
	var walk func(n *modelNode, d int)
	walk = func(n *modelNode, d int) {
		if n.sym >= 0 {
			bl[d]++
			return
		}
		walk(n.left, d+1)
		walk(n.right, d+1)
	}
	walk(pop(), 0)
	for i := len(bl) - 1; i > limit; i-- {
		for bl[i] > 0 {
			j := i - 2
			for bl[j] == 0 {
				j--
			}
			bl[i] -= 2
			bl[i-1]++
			bl[j+1] += 2
			bl[j]--
		}
	}
	sort.SliceStable(leaves, func(i, j int) bool {
		if leaves[i].w != leaves[j].w {
			return leaves[i].w > leaves[j].w
		}
		return leaves[i].sym < leaves[j].sym
	})
	out := make([]int, len(f))
	d := 1
	for _, n := range leaves {
		for bl[d] == 0 {
			d++
		}
		out[n.sym] = d
		bl[d]--
	}
	return out
}

// modelCanonical is RFC 1951 §3.2.2: the codes for the lengths.
func modelCanonical(lengths []int) []uint32 {
	var count [16]uint32
	for _, l := range lengths {
		if l > 0 {
			count[l]++
		}
	}
	var next [16]uint32
	code := uint32(0)
	for b := 1; b < 16; b++ {
		code = (code + count[b-1]) << 1
		next[b] = code
	}
	out := make([]uint32, len(lengths))
	for s, l := range lengths {
		if l > 0 {
			out[s] = next[l]
			next[l]++
		}
	}
	return out
}

// pngTestOp is the encoding op the planner makes for `save format=png`
// (compression=fast): the model is its CPU side, pngFileBound its bound.
func pngTestOp() sched.Op {
	return sched.Op{Name: "save", Spec: "save format=png", Encode: &sched.EncodeOp{
		Format: pngFormat,
		Bound:  func(in sched.Shape) int { return int(pngFileBound(int64(in.W), int64(in.H), int64(in.C))) },
		CPU: func(dst []byte, src *stages.Image) int {
			return copy(dst, modelEncode(packedPix(src), src.W, src.H, src.C))
		},
	}}
}

// packedPix returns an image's rows tightly packed.
func packedPix(m *stages.Image) []byte {
	out := make([]byte, 0, m.W*m.H*m.C)
	for y := range m.H {
		out = append(out, m.Row(y)...)
	}
	return out
}
