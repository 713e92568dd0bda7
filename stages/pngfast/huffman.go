package pngfast

import (
	"errors"
	"fmt"
	"math/bits"
	"slices"
)

// Alphabet sizes and length limits of docs/png-fast.md §3-4.
const (
	numLit      = 257 // literal/length symbols: the 256 byte values and end-of-block
	endOfBlock  = 256
	maxLitBits  = 15 // deflate's limit for literal/length codes
	numCL       = 19 // code-length symbols
	maxCLBits   = 7  // deflate's limit for code-length codes
	maxSymbols  = numLit
	maxTreeNode = 2*maxSymbols - 1
)

// ErrTooFewSymbols is returned by Lengths when fewer than two counts are
// non-zero: a Huffman code needs two leaves.
var ErrTooFewSymbols = errors.New("pngfast: Lengths needs at least two non-zero counts")

// Lengths returns the code lengths of docs/png-fast.md §3 for the counts f,
// limited to limit bits: Huffman lengths from a two-queue construction with
// the spec's tie-breaking, then JPEG's Adjust_BITS, then lengths handed out
// by (count descending, symbol ascending). Symbols with count 0 get 0. It
// fails when fewer than two counts are non-zero, when more than 2^limit are
// (no code of that limit exists), or beyond 257 symbols or 15 bits, the
// largest the format uses.
func Lengths(f []uint32, limit int) ([]uint8, error) {
	if len(f) > maxSymbols || limit < 1 || limit > maxLitBits {
		return nil, fmt.Errorf("pngfast: Lengths of %d symbols limited to %d bits: want at most %d symbols and 1..%d bits", len(f), limit, maxSymbols, maxLitBits)
	}
	k := 0
	for _, v := range f {
		if v > 0 {
			k++
		}
	}
	if k < 2 {
		return nil, ErrTooFewSymbols
	}
	if k > 1<<limit {
		return nil, fmt.Errorf("pngfast: %d symbols do not fit a code of at most %d bits", k, limit)
	}
	out := make([]uint8, len(f))
	var h huffman
	h.lengths(f, limit, out)
	return out, nil
}

// huffman is the scratch of one length construction, kept in the pooled
// encoder so that building a block's code allocates nothing.
type huffman struct {
	keys   [maxSymbols]uint64  // count<<16 | symbol of the leaves, sorted ascending
	weight [maxTreeNode]uint64 // leaves first (in keys order), then internal nodes as made
	parent [maxTreeNode]uint16
	depth  [maxTreeNode]uint16
	bl     [maxSymbols + 1]int // leaves per depth
}

// lengths writes into out (len(f) long) the code lengths for f; the caller
// has checked that 2 ≤ (non-zero counts) ≤ 2^limit.
func (h *huffman) lengths(f []uint32, limit int, out []uint8) {
	// Step 1: leaves sorted by (count, symbol); one integer key sorts both.
	k := 0
	for s, v := range f {
		out[s] = 0
		if v > 0 {
			h.keys[k] = uint64(v)<<16 | uint64(s)
			k++
		}
	}
	keys := h.keys[:k]
	slices.Sort(keys)

	// Step 2: two queues. Leaves are nodes 0..k-1 in sorted order, internal
	// nodes k.. in the order they are made; a parent is always made after
	// its children, so its id is larger.
	for i, key := range keys {
		h.weight[i] = key >> 16
	}
	a, b, next := 0, k, k // heads of queue A and B, next internal node
	pick := func() int {
		if a < k && (b == next || h.weight[a] <= h.weight[b]) {
			a++
			return a - 1
		}
		b++
		return b - 1
	}
	for next < 2*k-1 {
		x := pick()
		y := pick()
		h.weight[next] = h.weight[x] + h.weight[y]
		h.parent[x], h.parent[y] = uint16(next), uint16(next)
		next++
	}
	root := 2*k - 2
	h.depth[root] = 0
	clear(h.bl[:])
	maxDepth := 0
	for id := root - 1; id >= 0; id-- {
		d := h.depth[h.parent[id]] + 1
		h.depth[id] = d
		if id < k {
			h.bl[d]++
			maxDepth = max(maxDepth, int(d))
		}
	}

	// Step 3: Adjust_BITS (ITU T.81 K.3). Two siblings at the deepest level
	// become one leaf a level up, and a shallower leaf j splits into two at
	// j+1: the count of leaves and the Kraft sum stay the same.
	for i := maxDepth; i > limit; i-- {
		for h.bl[i] > 0 {
			j := i - 2
			for h.bl[j] == 0 {
				j--
			}
			h.bl[i] -= 2
			h.bl[i-1]++
			h.bl[j+1] += 2
			h.bl[j]--
		}
	}

	// Step 4: the shortest lengths to the largest counts, ties to the
	// smaller symbol: walk the ascending keys from the top, one run of equal
	// counts at a time, each run in ascending symbol order.
	d, left := 1, h.bl[1]
	for hi := k - 1; hi >= 0; {
		lo := hi
		for lo > 0 && keys[lo-1]>>16 == keys[hi]>>16 {
			lo--
		}
		for _, key := range keys[lo : hi+1] {
			for left == 0 {
				d++
				left = h.bl[d]
			}
			out[key&0xffff] = uint8(d)
			left--
		}
		hi = lo - 1
	}
}

// codeTable holds, per symbol, the canonical code (RFC 1951 §3.2.2) with
// its bits reversed for deflate's LSB-first packing, in the low 16 bits, and
// its length in the bits above: one load gives both.
type codeTable [maxSymbols]uint32

// canonical fills t with the canonical codes of lengths (all ≤ 15).
func (t *codeTable) canonical(lengths []uint8) {
	var count [maxLitBits + 1]uint16
	for _, l := range lengths {
		count[l]++
	}
	count[0] = 0
	var next [maxLitBits + 1]uint16
	code := uint16(0)
	for l := 1; l <= maxLitBits; l++ {
		code = (code + count[l-1]) << 1
		next[l] = code
	}
	for s, l := range lengths {
		if l == 0 {
			t[s] = 0
			continue
		}
		c := next[l]
		next[l]++
		t[s] = uint32(bits.Reverse16(c)>>(16-l)) | uint32(l)<<16
	}
}
