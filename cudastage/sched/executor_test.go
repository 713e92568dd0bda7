package sched_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/imgpipe/imgpipe/cudastage/sched"
	"github.com/imgpipe/imgpipe/cudastage/sched/schedtest"

	"github.com/imgpipe/imgpipe/stages"
	"github.com/imgpipe/imgpipe/stages/stagestest"
)

// mixedSizes covers the edge shapes: 1×1, a row, a column, odd sizes.
var mixedSizes = [][2]int{{1, 1}, {1, 37}, {37, 1}, {17, 9}, {33, 65}, {64, 48}, {100, 3}, {2, 2}}

// mixedImages returns n random images cycling through mixedSizes, RGB and
// gray alternately.
func mixedImages(seed uint64, n int) []*stages.Image {
	rng := rand.New(rand.NewPCG(seed, 1))
	imgs := make([]*stages.Image, n)
	for i := range imgs {
		sz := mixedSizes[i%len(mixedSizes)]
		c := 3
		if (i/len(mixedSizes))%2 == 1 {
			c = 1
		}
		imgs[i] = stagestest.RandImage(rng, sz[0], sz[1], c)
	}
	return imgs
}

// pushAll reserves, fills and commits every image (tag = index) from several
// goroutines, then closes the input. It returns the first Reserve error.
func pushAll(ctx context.Context, e *Executor, imgs []*stages.Image, workers int) error {
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make([]error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= len(imgs) {
					return
				}
				m := imgs[i]
				r, err := e.Reserve(ctx, m.W, m.H, m.C, i)
				if err != nil {
					errs[w] = err
					return
				}
				copy(r.Image().Pix, m.Pix)
				r.Commit()
			}
		}()
	}
	wg.Wait()
	e.CloseInput()
	return errors.Join(errs...)
}

// commitAll reserves, fills and commits every image (tag = index) in order, on the
// calling goroutine, leaving the input open.
func commitAll(t *testing.T, e *Executor, imgs []*stages.Image) {
	t.Helper()
	for i, m := range imgs {
		r, err := e.Reserve(context.Background(), m.W, m.H, m.C, i)
		if err != nil {
			t.Fatal(err)
		}
		copy(r.Image().Pix, m.Pix)
		r.Commit()
	}
}

// checkResults reads every result, compares it with the CPU reference and
// releases it; each tag must come exactly once.
func checkResults(t *testing.T, e *Executor, ops []Op, imgs []*stages.Image) {
	t.Helper()
	seen := make([]bool, len(imgs))
	for r := range e.Results() {
		i := r.Tag.(int)
		if seen[i] {
			t.Errorf("image %d delivered twice", i)
		}
		seen[i] = true
		want, wantHist := cpuRef(ops, imgs[i])
		if r.In != (Shape{W: imgs[i].W, H: imgs[i].H, C: imgs[i].C}) {
			t.Errorf("image %d: In = %v", i, r.In)
		}
		if d := stagestest.Diff(r.Image, want); d != "" {
			t.Errorf("image %d (%dx%dx%d): %s", i, imgs[i].W, imgs[i].H, imgs[i].C, d)
		}
		switch {
		case (r.Hist == nil) != (wantHist == nil):
			t.Errorf("image %d: histogram %v, want %v", i, r.Hist != nil, wantHist != nil)
		case r.Hist != nil && *r.Hist != *wantHist:
			t.Errorf("image %d: histogram differs", i)
		}
		r.Release()
	}
	for i, ok := range seen {
		if !ok {
			t.Errorf("image %d never delivered", i)
		}
	}
}

func TestExecutorMatchesCPU(t *testing.T) {
	chains := []struct {
		name string
		ops  []Op
	}{
		{"target", []Op{GrayscaleOp(), MustBlurOp(t, 1.5), TransposeOp(), HistogramOp()}},
		{"boxblur", []Op{MustBoxBlurOp(t, 1)}},
		{"boxblur15-transpose", []Op{MustBoxBlurOp(t, 15), TransposeOp()}},
		{"histogram-only", []Op{HistogramOp()}},
		{"hist-gray-hist", []Op{HistogramOp(), GrayscaleOp(), HistogramOp()}},
		{"transpose-transpose-blur", []Op{TransposeOp(), TransposeOp(), MustBlurOp(t, 0.5)}},
		{"grayscale", []Op{GrayscaleOp()}},
		{"blur32", []Op{MustBlurOp(t, 32)}},
	}
	configs := []Config{
		{Streams: 1, Slots: 1, Batch: 1, SlotBytes: 20000},
		{Streams: 2, Slots: 3, Batch: 4, SlotBytes: 20000},
		{Streams: 4, Slots: 6, Batch: 16, SlotBytes: 40000}, // sealed by capacity more than by count
	}
	for _, ch := range chains {
		for _, cfg := range configs {
			t.Run(fmt.Sprintf("%s/s%d-n%d-b%d", ch.name, cfg.Streams, cfg.Slots, cfg.Batch), func(t *testing.T) {
				t.Parallel()
				dev := schedtest.NewFake(schedtest.FakeConfig{CopyLatency: 50 * time.Microsecond})
				cfg.Ops = ch.ops
				cfg.Linger = 2 * time.Millisecond
				e := startExec(t, context.Background(), dev, cfg)
				imgs := mixedImages(uint64(len(ch.name)), 40)
				errc := make(chan error, 1)
				go func() { errc <- pushAll(context.Background(), e, imgs, 3) }()
				checkResults(t, e, ch.ops, imgs)
				if err := <-errc; err != nil {
					t.Fatal(err)
				}
				if err := e.Wait(); err != nil {
					t.Fatal(err)
				}
				st := e.Stats()
				if st.Images != int64(len(imgs)) || st.Batches < int64(len(imgs)/cfg.Batch) {
					t.Errorf("stats: %d images in %d batches", st.Images, st.Batches)
				}
			})
		}
	}
}

func TestResultsInReservationOrder(t *testing.T) {
	ops := []Op{GrayscaleOp(), TransposeOp()}
	dev := schedtest.NewFake(schedtest.FakeConfig{H2DRate: 50e6, D2HRate: 50e6})
	e := startExec(t, context.Background(), dev, Config{Ops: ops, Streams: 3, Slots: 4, Batch: 3, SlotBytes: 30000})
	imgs := mixedImages(7, 50)
	go pushAll(context.Background(), e, imgs, 1)
	var order []int
	for r := range e.Results() {
		order = append(order, r.Tag.(int))
		r.Release()
	}
	want := make([]int, len(imgs))
	for i := range want {
		want[i] = i
	}
	if !slices.Equal(order, want) {
		t.Errorf("results in order %v, want reservation order", order)
	}
}

// TestSlotReuse checks that a slot is taken for a new batch only after its
// previous batch's D2H completed and every one of its results was released,
// and that held results keep their bytes while later batches run.
func TestSlotReuse(t *testing.T) {
	ops := []Op{GrayscaleOp(), MustBlurOp(t, 1), HistogramOp()}
	dev := schedtest.NewFake(schedtest.FakeConfig{H2DRate: 20e6, D2HRate: 10e6, CopyLatency: 100 * time.Microsecond})
	e := startExec(t, context.Background(), dev, Config{Ops: ops, Streams: 2, Slots: 3, Batch: 2, SlotBytes: 30000, Linger: time.Millisecond})

	var mu sync.Mutex
	held := map[int]int{} // slot id → results delivered and not released
	var reopened atomic.Int64
	e.SetOnOpen(func(s OpenedSlot) {
		mu.Lock()
		defer mu.Unlock()
		if n := held[s.ID]; n != 0 {
			t.Errorf("slot %d reopened with %d results unreleased", s.ID, n)
		}
		if s.Held != 0 {
			t.Errorf("slot %d reopened with held=%d", s.ID, s.Held)
		}
		if !dev.EventDone(s.D2H) {
			t.Errorf("slot %d reopened before its D2H completed", s.ID)
		}
		reopened.Add(1)
	})

	imgs := mixedImages(3, 60)
	go pushAll(context.Background(), e, imgs, 2)
	rng := rand.New(rand.NewPCG(5, 5))
	var pending []*Result
	releaseOne := func() {
		r := pending[0]
		pending = pending[1:]
		i := r.Tag.(int)
		want, _ := cpuRef(ops, imgs[i])
		if d := stagestest.Diff(r.Image, want); d != "" {
			t.Errorf("image %d changed while held: %s", i, d)
		}
		mu.Lock()
		held[r.SlotID()]--
		mu.Unlock()
		r.Release()
	}
	n := 0
	for r := range e.Results() {
		n++
		mu.Lock()
		held[r.SlotID()]++
		mu.Unlock()
		pending = append(pending, r)
		// Hold up to two results (less than a slot's worth across slots)
		// for a random while, so slots stay held as batches go on.
		for len(pending) > 2 || (len(pending) > 0 && rng.IntN(3) == 0) {
			time.Sleep(time.Duration(rng.IntN(500)) * time.Microsecond)
			releaseOne()
		}
	}
	for len(pending) > 0 {
		releaseOne()
	}
	if n != len(imgs) {
		t.Errorf("%d results, want %d", n, len(imgs))
	}
	if reopened.Load() < 10 {
		t.Errorf("slots reopened %d times: the test did not exercise reuse", reopened.Load())
	}
	if err := e.Wait(); err != nil {
		t.Fatal(err)
	}
}

func TestPageable(t *testing.T) {
	ops := []Op{GrayscaleOp(), TransposeOp(), HistogramOp()}
	dev := schedtest.NewFake(schedtest.FakeConfig{PageableRate: 100e6})
	e := startExec(t, context.Background(), dev, Config{Ops: ops, Streams: 1, Slots: 2, Batch: 3, SlotBytes: 30000, Pageable: true})
	imgs := mixedImages(6, 20)
	go pushAll(context.Background(), e, imgs, 2)
	checkResults(t, e, ops, imgs)
	if err := e.Wait(); err != nil {
		t.Fatal(err)
	}
	calls := dev.Calls()
	if calls["HtoD"] != 0 || calls["DtoH"] != 0 || calls["HtoD pageable"] == 0 || calls["DtoH pageable"] == 0 {
		t.Errorf("pageable run made copies %v, want only synchronous ones", calls)
	}
	if live := dev.Live(); live.HostBufs != 0 {
		t.Errorf("pageable slots took %d page-locked buffers", live.HostBufs)
	}

	// A device that refuses Go memory for copies makes a pageable run fail,
	// rather than letting an async copy read the Go heap.
	strict := schedtest.NewFake(schedtest.FakeConfig{})
	e2 := startExec(t, context.Background(), strict, Config{Ops: ops, Streams: 2, Slots: 2, Batch: 1, SlotBytes: 4096, Linger: 20 * time.Millisecond, Pageable: true})
	go pushAll(context.Background(), e2, imgs[:3], 1)
	for r := range e2.Results() {
		r.Release()
	}
	if err := e2.Wait(); err == nil || !strings.Contains(err.Error(), "page-locked") {
		t.Errorf("pageable copies on a strict device: %v", err)
	}
}
