package pngfast

import (
	"fmt"
	"math/rand"
	"slices"
	"testing"
)

// TestBlockHeadersFollowTheSpec reads every block header back, bit by bit,
// and checks it against docs/png-fast.md §3-4 built independently here:
// HLIT = HDIST = 0, the literal/length lengths are refLengths of the block's
// counts, the run-length symbols are §4's, the code-length lengths are
// refLengths of their counts, HCLEN is the spec's, and the codes are the
// canonical ones (decoding with them gives the expected symbols).
func TestBlockHeadersFollowTheSpec(t *testing.T) {
	rng := rand.New(rand.NewSource(21))
	gray, rgb := photos(t)
	images := []img{
		randomImg(rng, 1, 1, 1, 0), smoothImg(rng, 300, 250, 1, 3), randomImg(rng, 200, 150, 3, 0),
		gray[0], rgb[0],
	}
	for i, m := range images {
		t.Run(fmt.Sprintf("%d/%dx%dx%d", i, m.w, m.h, m.c), func(t *testing.T) {
			cs := chunks(t, encode(m))
			f := refFiltered(m)
			for k, c := range cs[1 : len(cs)-1] {
				blk := c.data
				if k == 0 {
					blk = blk[2:]
				}
				want := f[k*BlockSize : min(len(f), (k+1)*BlockSize)]
				checkHeader(t, blk, want, k == len(cs)-3)
			}
		})
	}
}

type bitReader struct {
	p   []byte
	pos int // in bits
}

func (r *bitReader) bits(n int) int {
	v := 0
	for i := range n {
		v |= int(r.p[r.pos>>3]>>(r.pos&7)&1) << i
		r.pos++
	}
	return v
}

// symbol decodes one symbol of the canonical code of lengths, reading the
// code most significant bit first as RFC 1951 packs it.
func (r *bitReader) symbol(t *testing.T, lengths []uint8) int {
	codes := refCanonical(lengths)
	code, n := 0, 0
	for n < 16 {
		code = code<<1 | r.bits(1)
		n++
		for s, l := range lengths {
			if int(l) == n && codes[s] == code {
				return s
			}
		}
	}
	t.Fatalf("no symbol for code %b", code)
	return -1
}

// refCanonical is RFC 1951 §3.2.2's algorithm, as written there.
func refCanonical(lengths []uint8) []int {
	blCount := make([]int, 16)
	for _, l := range lengths {
		if l > 0 {
			blCount[l]++
		}
	}
	next := make([]int, 16)
	code := 0
	for b := 1; b < 16; b++ {
		code = (code + blCount[b-1]) << 1
		next[b] = code
	}
	codes := make([]int, len(lengths))
	for s, l := range lengths {
		if l > 0 {
			codes[s] = next[l]
			next[l]++
		}
	}
	return codes
}

// refRunLengths is §4's run-length coding: symbol and extra value pairs.
func refRunLengths(seq []uint8) [][2]int {
	var out [][2]int
	for i := 0; i < len(seq); {
		if seq[i] != 0 {
			out = append(out, [2]int{int(seq[i]), 0})
			i++
			continue
		}
		j := i
		for j < len(seq) && seq[j] == 0 {
			j++
		}
		r := j - i
		i = j
		for r >= 11 {
			k := min(r, 138)
			out = append(out, [2]int{18, k - 11})
			r -= k
		}
		if r >= 3 {
			out = append(out, [2]int{17, r - 3})
			r = 0
		}
		for ; r > 0; r-- {
			out = append(out, [2]int{0, 0})
		}
	}
	return out
}

func checkHeader(t *testing.T, blk, data []byte, last bool) {
	t.Helper()
	counts := make([]uint32, numLit)
	for _, b := range data {
		counts[b]++
	}
	counts[endOfBlock] = 1
	litL, _ := refLengths(counts, 15)
	rle := refRunLengths(append(slices.Clone(litL), 0))
	g := make([]uint32, numCL)
	for _, s := range rle {
		g[s[0]]++
	}
	clL, _ := refLengths(g, 7)
	hclen := numCL
	for hclen > 4 && clL[clOrder[hclen-1]] == 0 {
		hclen--
	}

	r := &bitReader{p: blk}
	if bfinal, btype := r.bits(1), r.bits(2); bfinal != map[bool]int{true: 1}[last] || btype != 2 {
		t.Fatalf("BFINAL %d BTYPE %d", bfinal, btype)
	}
	if hlit, hdist, hc := r.bits(5), r.bits(5), r.bits(4); hlit != 0 || hdist != 0 || hc != hclen-4 {
		t.Fatalf("HLIT %d HDIST %d HCLEN %d, want 0 0 %d", hlit, hdist, hc, hclen-4)
	}
	gotCL := make([]uint8, numCL)
	for _, s := range clOrder[:hclen] {
		gotCL[s] = uint8(r.bits(3))
	}
	if !slices.Equal(gotCL, clL) {
		t.Fatalf("code-length lengths %v, want %v", gotCL, clL)
	}
	for i, want := range rle {
		sym := r.symbol(t, clL)
		extra := 0
		switch sym {
		case 17:
			extra = r.bits(3)
		case 18:
			extra = r.bits(7)
		}
		if sym != want[0] || extra != want[1] {
			t.Fatalf("run-length symbol %d: %d+%d, want %d+%d", i, sym, extra, want[0], want[1])
		}
	}
	// The first literals and the end-of-block decode with litL's codes.
	for i, b := range data[:min(len(data), 64)] {
		if s := r.symbol(t, litL); s != int(b) {
			t.Fatalf("literal %d: %d, want %d", i, s, b)
		}
	}
}
