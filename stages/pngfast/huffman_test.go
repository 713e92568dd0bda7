package pngfast

import (
	"container/heap"
	"fmt"
	"math"
	"math/rand"
	"slices"
	"sort"
	"strings"
	"testing"
)

// refLengths is a second, deliberately different implementation of
// docs/png-fast.md §3's Lengths: one priority queue over all nodes instead of
// two queues, depths by walking the tree from the root, Adjust_BITS on a
// slice and a stable sort for the assignment. The two-queue rule (the smaller
// head, A's on a tie) is a priority order: weight, then leaves before
// internal nodes, leaves by (count, symbol), internal nodes by creation.
func refLengths(f []uint32, limit int) (lengths []uint8, unlimited []int) {
	type leaf struct{ s, f int }
	var leaves []leaf
	for s, v := range f {
		if v > 0 {
			leaves = append(leaves, leaf{s, int(v)})
		}
	}
	sort.Slice(leaves, func(i, j int) bool {
		if leaves[i].f != leaves[j].f {
			return leaves[i].f < leaves[j].f
		}
		return leaves[i].s < leaves[j].s
	})
	pq := &nodeQueue{}
	for i, l := range leaves {
		heap.Push(pq, &node{weight: l.f, order: i, leaf: i})
	}
	made := 0
	for pq.Len() > 1 {
		a, b := heap.Pop(pq).(*node), heap.Pop(pq).(*node)
		heap.Push(pq, &node{weight: a.weight + b.weight, internal: true, order: made, kids: [2]*node{a, b}, leaf: -1})
		made++
	}
	depth := make([]int, len(leaves))
	var walk func(n *node, d int)
	walk = func(n *node, d int) {
		if !n.internal {
			depth[n.leaf] = d
			return
		}
		walk(n.kids[0], d+1)
		walk(n.kids[1], d+1)
	}
	walk(heap.Pop(pq).(*node), 0)

	bl := make([]int, slices.Max(depth)+1)
	for _, d := range depth {
		bl[d]++
	}
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
	byCount := slices.Clone(leaves)
	sort.SliceStable(byCount, func(i, j int) bool { return byCount[i].f > byCount[j].f }) // s ascending kept
	lengths = make([]uint8, len(f))
	d := 1
	for _, l := range byCount {
		for bl[d] == 0 {
			d++
		}
		lengths[l.s] = uint8(d)
		bl[d]--
	}
	return lengths, depth
}

type node struct {
	weight   int
	internal bool
	order    int
	leaf     int
	kids     [2]*node
}

type nodeQueue []*node

func (q nodeQueue) Len() int { return len(q) }
func (q nodeQueue) Less(i, j int) bool {
	a, b := q[i], q[j]
	if a.weight != b.weight {
		return a.weight < b.weight
	}
	if a.internal != b.internal {
		return !a.internal
	}
	return a.order < b.order
}
func (q nodeQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *nodeQueue) Push(x any)   { *q = append(*q, x.(*node)) }
func (q *nodeQueue) Pop() any {
	old := *q
	n := old[len(old)-1]
	*q = old[:len(old)-1]
	return n
}

// fibCounts gives k symbols Fibonacci counts, the classic worst case: the
// Huffman tree is a chain k−1 deep.
func fibCounts(n, k int) []uint32 {
	f := make([]uint32, n)
	a, b := uint32(1), uint32(1)
	for s := range k {
		f[s] = a
		a, b = b, a+b
	}
	return f
}

func TestLengthsMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	random := func(n int, top uint32, zeroEvery int) []uint32 {
		f := make([]uint32, n)
		for s := range f {
			if zeroEvery == 0 || rng.Intn(zeroEvery) != 0 {
				f[s] = 1 + rng.Uint32()%top
			}
		}
		f[0], f[n-1] = max(f[0], 1), max(f[n-1], 1)
		return f
	}
	equal := make([]uint32, numLit)
	for s := range equal {
		equal[s] = 7
	}
	skewed := random(numLit, 1<<20, 3)
	skewed[17] = math.MaxUint32 // sums beyond 32 bits
	skewed[18] = math.MaxUint32
	tests := []struct {
		name      string
		f         []uint32
		limit     int
		wantDeep  int // the unlimited tree is at least this deep (0: no check)
		wantLimit bool
	}{
		{"two symbols", []uint32{0, 5, 0, 9}, 15, 0, false},
		{"two equal", []uint32{3, 3}, 1, 0, false},
		{"all 257 equal", equal, 15, 0, false},
		{"fibonacci 257 syms over 15", fibCounts(numLit, 40), 15, 39, true},
		{"fibonacci 46 of 257, 45 deep", fibCounts(numLit, 46), 15, 45, true},
		{"fibonacci 19 over 7", fibCounts(numCL, 19), 7, 18, true},
		{"fibonacci 12 over 7", fibCounts(numCL, 12), 7, 11, true},
		{"fibonacci 128 at 7", fibCounts(128, 28), 7, 27, true},
		{"random block-like", random(numLit, 65536, 4), 15, 0, false},
		{"random small", random(numCL, 50, 2), 7, 0, false},
		{"skewed, huge counts", skewed, 15, 0, false},
	}
	for i := range 20 {
		tests = append(tests, struct {
			name      string
			f         []uint32
			limit     int
			wantDeep  int
			wantLimit bool
		}{fmt.Sprintf("random %d", i), random(2+rng.Intn(numLit-1), uint32(1+rng.Intn(1<<uint(rng.Intn(31)))), 1+rng.Intn(4)), 15, 0, false})
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Lengths(tc.f, tc.limit)
			if err != nil {
				t.Fatal(err)
			}
			want, depth := refLengths(tc.f, tc.limit)
			if !slices.Equal(got, want) {
				t.Fatalf("Lengths = %v\nreference %v", got, want)
			}
			if d := slices.Max(depth); d < tc.wantDeep || (tc.wantLimit && d <= tc.limit) {
				t.Fatalf("unlimited depth %d: the case does not exercise the limit as meant (want ≥ %d)", d, tc.wantDeep)
			}
			checkCode(t, tc.f, got, tc.limit)
			if slices.Max(depth) <= tc.limit {
				// Nothing was limited: the code must be optimal, i.e. cost
				// what the Huffman tree does (the sum of internal weights).
				if c, h := cost(tc.f, got), huffmanCost(tc.f); c != h {
					t.Fatalf("cost %d, Huffman's optimum %d", c, h)
				}
			}
		})
	}
}

// checkCode checks what any deflate code needs: lengths within the limit,
// zero exactly for the unused symbols, the Kraft sum exactly 1 (complete),
// and larger counts never get longer codes.
func checkCode(t *testing.T, f []uint32, l []uint8, limit int) {
	t.Helper()
	kraft := 0.0
	for s := range f {
		if (f[s] == 0) != (l[s] == 0) || int(l[s]) > limit {
			t.Fatalf("symbol %d: count %d, length %d (limit %d)", s, f[s], l[s], limit)
		}
		if l[s] > 0 {
			kraft += math.Ldexp(1, -int(l[s]))
		}
		for r := range f {
			if f[r] > f[s] && l[r] > l[s] && l[s] > 0 {
				t.Fatalf("count %d gets %d bits, count %d only %d", f[r], l[r], f[s], l[s])
			}
		}
	}
	if kraft != 1 {
		t.Fatalf("Kraft sum %v, want 1", kraft)
	}
}

func cost(f []uint32, l []uint8) uint64 {
	var c uint64
	for s := range f {
		c += uint64(f[s]) * uint64(l[s])
	}
	return c
}

// huffmanCost is the optimal cost, by repeatedly merging the two smallest.
func huffmanCost(f []uint32) uint64 {
	var w []uint64
	for _, v := range f {
		if v > 0 {
			w = append(w, uint64(v))
		}
	}
	var c uint64
	for len(w) > 1 {
		slices.Sort(w)
		s := w[0] + w[1]
		c += s
		w = append(w[2:], s)
	}
	return c
}

func TestLengthsErrors(t *testing.T) {
	tests := []struct {
		name  string
		f     []uint32
		limit int
		want  string
	}{
		{"none", make([]uint32, 10), 15, "at least two"},
		{"one", []uint32{0, 4, 0}, 15, "at least two"},
		{"too many for the limit", fibCounts(9, 9), 3, "9 symbols do not fit"},
		{"limit 0", []uint32{1, 1}, 0, "1..15 bits"},
		{"limit 16", []uint32{1, 1}, 16, "1..15 bits"},
		{"too many symbols", make([]uint32, 258), 15, "at most 257 symbols"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Lengths(tc.f, tc.limit)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
}

func TestCanonicalCodes(t *testing.T) {
	// RFC 1951 §3.2.2's example: lengths (3, 3, 3, 3, 3, 2, 4, 4) give
	// 010, 011, 100, 101, 110, 00, 1110, 1111.
	lengths := []uint8{3, 3, 3, 3, 3, 2, 4, 4}
	want := []string{"010", "011", "100", "101", "110", "00", "1110", "1111"}
	var tab codeTable
	tab.canonical(lengths)
	for s, w := range want {
		e := tab[s]
		l := int(e >> 16)
		var b strings.Builder
		for i := range l { // stored reversed: the first code bit is bit 0
			b.WriteByte('0' + byte(e>>uint(i)&1))
		}
		if b.String() != w || l != int(lengths[s]) {
			t.Errorf("symbol %d: code %q (length %d), want %q", s, b.String(), l, w)
		}
	}
}
