package sched

import (
	"slices"
	"testing"
)

func TestChainPlan(t *testing.T) {
	ops := []Op{GrayscaleOp(), HistogramOp(), MustBlurOp(t, 1), TransposeOp()}
	c := newChain(ops, 1<<20, 1<<20)
	if c.nImg != 3 || !c.hasHist || len(c.caps) != 4 {
		t.Fatalf("chain: nImg %d hasHist %v caps %v", c.nImg, c.hasHist, c.caps)
	}
	shapes, need := c.plan(Shape{W: 17, H: 9, C: 3})
	wantShapes := []Shape{{W: 17, H: 9, C: 3}, {W: 17, H: 9, C: 1}, {W: 17, H: 9, C: 1}, {W: 17, H: 9, C: 1}, {W: 9, H: 17, C: 1}}
	if !slices.Equal(shapes, wantShapes) {
		t.Errorf("shapes %v, want %v", shapes, wantShapes)
	}
	wantNeed := []int{512, 256, 256, 256} // 459 → 512, 153 → 256
	if !slices.Equal(need, wantNeed) {
		t.Errorf("need %v, want %v", need, wantNeed)
	}
	// Image ops alternate mid, in, mid: the output is in mid.
	if got := c.finalBuf(); got != bufMid {
		t.Errorf("finalBuf = %d, want mid", got)
	}
	if got := newChain([]Op{HistogramOp()}, 1024, 1024).finalBuf(); got != -1 {
		t.Errorf("histogram-only finalBuf = %d, want -1", got)
	}
	if got := newChain([]Op{GrayscaleOp(), TransposeOp()}, 1024, 1024).finalBuf(); got != bufIn {
		t.Errorf("two-op finalBuf = %d, want in", got)
	}
}

func TestChainFits(t *testing.T) {
	c := newChain([]Op{GrayscaleOp()}, 1024, 1024)
	tests := []struct {
		used, need []int
		want       bool
	}{
		{[]int{0, 0}, []int{1024, 256}, true},
		{[]int{0, 0}, []int{1280, 256}, false},
		{[]int{768, 256}, []int{256, 256}, true},
		{[]int{768, 900}, []int{256, 256}, false},
	}
	for _, tt := range tests {
		if got := c.fits(tt.used, tt.need); got != tt.want {
			t.Errorf("fits(%v, %v) = %v, want %v", tt.used, tt.need, got, tt.want)
		}
	}
}

func TestFillCalls(t *testing.T) {
	ops := []Op{GrayscaleOp(), HistogramOp(), TransposeOp()}
	c := newChain(ops, 1<<20, 1<<20)
	var imgs []imgLayout
	used := make([]int, 1+c.nImg)
	for _, s := range []Shape{{W: 5, H: 3, C: 3}, {W: 1, H: 1, C: 3}, {W: 300, H: 2, C: 3}} {
		shapes, need := c.plan(s)
		offs := slices.Clone(used)
		for i := range used {
			used[i] += need[i]
		}
		imgs = append(imgs, imgLayout{shapes: shapes, offs: offs})
	}
	calls := make([]OpCall, len(ops))
	const in, mid, hist = DevPtr(10), DevPtr(20), DevPtr(30)
	c.fillCalls(calls, imgs, [2]DevPtr{in, mid}, hist, 0)

	if calls[0].Src != in || calls[0].Dst != mid || calls[0].Hist != 0 {
		t.Errorf("grayscale reads %d writes %d hist %d", calls[0].Src, calls[0].Dst, calls[0].Hist)
	}
	if calls[1].Src != mid || calls[1].Dst != 0 || calls[1].Hist != hist {
		t.Errorf("histogram reads %d writes %d hist %d", calls[1].Src, calls[1].Dst, calls[1].Hist)
	}
	if calls[2].Src != mid || calls[2].Dst != in {
		t.Errorf("transpose reads %d writes %d", calls[2].Src, calls[2].Dst)
	}
	// Offsets: input packed by RGB size, outputs by their own sizes.
	wantSrc0 := []int{0, 256, 512}
	wantDst0 := []int{0, 256, 512}
	wantDst2 := []int{0, 256, 512}
	for i := range imgs {
		if got := calls[0].Images[i]; got.SrcOff != wantSrc0[i] || got.DstOff != wantDst0[i] || got.Out.C != 1 {
			t.Errorf("grayscale image %d: %+v", i, got)
		}
		if got := calls[1].Images[i]; got.SrcOff != wantDst0[i] || got.HistOff != i*HistBytes {
			t.Errorf("histogram image %d: %+v", i, got)
		}
		if got := calls[2].Images[i]; got.SrcOff != wantDst0[i] || got.DstOff != wantDst2[i] ||
			got.Out != (Shape{W: imgs[i].shapes[0].H, H: imgs[i].shapes[0].W, C: 1}) {
			t.Errorf("transpose image %d: %+v", i, got)
		}
	}
	// Refilling with fewer images reuses the calls without stale entries.
	c.fillCalls(calls, imgs[:1], [2]DevPtr{in, mid}, hist, 0)
	for j := range calls {
		if len(calls[j].Images) != 1 {
			t.Errorf("op %d has %d images after refill, want 1", j, len(calls[j].Images))
		}
	}
}
