package sched_test

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	. "github.com/imgpipe/imgpipe/cudastage/sched"
	"github.com/imgpipe/imgpipe/cudastage/sched/schedtest"

	"github.com/imgpipe/imgpipe/stages"
	"github.com/imgpipe/imgpipe/stages/stagestest"
)

func TestBackPressure(t *testing.T) {
	dev := schedtest.NewFake(schedtest.FakeConfig{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	e := startExec(t, ctx, dev, Config{Ops: []Op{GrayscaleOp()}, Streams: 1, Slots: 2, Batch: 1, SlotBytes: 4096, Linger: -1})
	var res []*Result
	for i := range 2 {
		r, err := e.Reserve(ctx, 4, 4, 3, i)
		if err != nil {
			t.Fatal(err)
		}
		r.Commit() // Batch 1: sealed at once, submitted on commit
	}
	for range 2 {
		res = append(res, <-e.Results())
	}
	// Both slots are held by unreleased results: Reserve must block.
	short, cancelShort := context.WithTimeout(ctx, 50*time.Millisecond)
	_, err := e.Reserve(short, 4, 4, 3, 2)
	cancelShort()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Reserve with every slot held: %v, want it to block until the deadline", err)
	}
	// Releasing one result frees one slot.
	got := make(chan error, 1)
	go func() {
		r, err := e.Reserve(ctx, 4, 4, 3, 3)
		if err == nil {
			r.Commit()
		}
		got <- err
	}()
	select {
	case err := <-got:
		t.Fatalf("Reserve returned (%v) before any slot was released", err)
	case <-time.After(20 * time.Millisecond):
	}
	res[0].Release()
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	r := <-e.Results()
	if r.Tag != 3 {
		t.Errorf("got tag %v, want 3", r.Tag)
	}
	// A blocked Reserve returns when the executor stops.
	go func() { time.Sleep(20 * time.Millisecond); cancel() }()
	_, err = e.Reserve(context.Background(), 4, 4, 3, 4)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Reserve blocked at cancel: %v, want context.Canceled", err)
	}
	r.Release()
	res[1].Release()
	if err := e.Wait(); !errors.Is(err, context.Canceled) {
		t.Errorf("Wait = %v, want context.Canceled", err)
	}
	if n := e.FreeSlots(); n != 2 {
		t.Errorf("%d slots free after all releases, want 2", n)
	}
}

func TestAbortDropsOnlyThatImage(t *testing.T) {
	ops := []Op{GrayscaleOp(), HistogramOp()}
	dev := schedtest.NewFake(schedtest.FakeConfig{})
	e := startExec(t, context.Background(), dev, Config{Ops: ops, Streams: 2, Slots: 4, Batch: 4, SlotBytes: 1 << 16, Linger: -1})
	imgs := mixedImages(11, 4)
	for i, m := range imgs {
		r, err := e.Reserve(context.Background(), m.W, m.H, m.C, i)
		if err != nil {
			t.Fatal(err)
		}
		copy(r.Image().Pix, m.Pix)
		if i == 1 {
			r.Abort()
			r.Commit() // no effect after Abort
		} else {
			r.Commit()
		}
	}
	e.CloseInput()
	var tags []int
	for r := range e.Results() {
		tags = append(tags, r.Tag.(int))
		want, wantHist := cpuRef(ops, imgs[r.Tag.(int)])
		if d := stagestest.Diff(r.Image, want); d != "" || *r.Hist != *wantHist {
			t.Errorf("image %v: %s (hist equal %v)", r.Tag, d, *r.Hist == *wantHist)
		}
		r.Release()
	}
	if !slices.Equal(tags, []int{0, 2, 3}) {
		t.Errorf("results %v, want [0 2 3]", tags)
	}
	if st := e.Stats(); st.Batches != 1 || st.Images != 3 {
		t.Errorf("%d batches, %d images; want 1, 3", st.Batches, st.Images)
	}
}

func TestAllAbortedSlotIsFreed(t *testing.T) {
	dev := schedtest.NewFake(schedtest.FakeConfig{})
	e := startExec(t, context.Background(), dev, Config{Ops: []Op{GrayscaleOp()}, Streams: 2, Slots: 2, Batch: 4, SlotBytes: 4096, Linger: -1})
	for range 3 {
		r, err := e.Reserve(context.Background(), 3, 3, 3, nil)
		if err != nil {
			t.Fatal(err)
		}
		r.Abort()
	}
	e.Flush()
	e.CloseInput()
	for r := range e.Results() {
		t.Errorf("unexpected result %v", r.Tag)
		r.Release()
	}
	if err := e.Wait(); err != nil {
		t.Fatal(err)
	}
	if st := e.Stats(); st.Batches != 0 {
		t.Errorf("%d batches submitted for aborted images", st.Batches)
	}
	if e.FreeSlots() != 2 {
		t.Errorf("%d of 2 slots free", e.FreeSlots())
	}
	if c := dev.Calls()["HtoD"]; c != 0 {
		t.Errorf("%d H2D copies for a batch of aborted images", c)
	}
}

// decodeInto decodes data with stages.Decode straight into a reservation,
// then commits it, or aborts it and returns the decode error: what a decode
// worker does. A file too large for a slot gives an error wrapping
// ErrTooLarge (nothing decoded).
func decodeInto(ctx context.Context, e *Executor, data []byte, opt stages.DecodeOptions, tag any) error {
	var r *Reservation
	var allocErr error
	_, err := stages.Decode(data, opt, func(w, h, c int) (*stages.Image, error) {
		if r != nil {
			return nil, errors.New("decoder asked for a second image")
		}
		r, allocErr = e.Reserve(ctx, w, h, c, tag)
		if allocErr != nil {
			return nil, allocErr
		}
		return r.Image(), nil
	})
	switch {
	case allocErr != nil:
		return allocErr
	case err != nil:
		if r != nil {
			r.Abort()
		}
		return err
	case r == nil:
		return errors.New("decoder returned an image without allocating it")
	}
	r.Commit()
	return nil
}

func TestDecodeIntoSlot(t *testing.T) {
	ops := []Op{GrayscaleOp(), TransposeOp()}
	dev := schedtest.NewFake(schedtest.FakeConfig{})
	e := startExec(t, context.Background(), dev, Config{Ops: ops, Streams: 2, Slots: 4, Batch: 8, SlotBytes: 1 << 16, Linger: -1})
	rng := rand.New(rand.NewPCG(2, 3))
	var files [][]byte
	var want []*stages.Image
	for _, sz := range [][2]int{{17, 9}, {1, 1}, {40, 30}} {
		m := stagestest.RandImage(rng, sz[0], sz[1], 3)
		var buf bytes.Buffer
		if err := stages.Encode(&buf, m, stages.SaveOptions{Format: "png"}); err != nil {
			t.Fatal(err)
		}
		files = append(files, buf.Bytes())
		want = append(want, m)
	}
	truncated := files[2][:len(files[2])/2] // valid header: reserves, then fails
	inputs := [][]byte{files[0], truncated, files[1], []byte("not an image"), files[2]}
	wantOK := map[int]*stages.Image{0: want[0], 2: want[1], 4: want[2]}
	errs := make([]error, len(inputs))
	var wg sync.WaitGroup
	for i, data := range inputs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = decodeInto(context.Background(), e, data, stages.DecodeOptions{}, i)
		}()
	}
	wg.Wait()
	e.CloseInput()
	for i := range inputs {
		if _, ok := wantOK[i]; ok != (errs[i] == nil) {
			t.Errorf("input %d: Decode error %v", i, errs[i])
		}
	}
	n := 0
	for r := range e.Results() {
		n++
		i := r.Tag.(int)
		ref, _ := cpuRef(ops, wantOK[i])
		if d := stagestest.Diff(r.Image, ref); d != "" {
			t.Errorf("input %d: %s", i, d)
		}
		r.Release()
	}
	if n != len(wantOK) {
		t.Errorf("%d results, want %d", n, len(wantOK))
	}
	if st := e.Stats(); st.Batches != 1 {
		t.Errorf("%d batches, want the bad files to leave one batch of 3", st.Batches)
	}
}

func TestReserveErrors(t *testing.T) {
	dev := schedtest.NewFake(schedtest.FakeConfig{})
	e := startExec(t, context.Background(), dev, Config{Ops: []Op{GrayscaleOp()}, Streams: 2, Slots: 4, Batch: 2, SlotBytes: 4096, Linger: -1})
	ctx := context.Background()
	for _, s := range []Shape{{W: 0, H: 5, C: 3}, {W: 5, H: 0, C: 3}, {W: 5, H: 5, C: 2}, {W: 5, H: 5, C: 4}, {W: MaxSide + 1, H: 1, C: 1}} {
		if _, err := e.Reserve(ctx, s.W, s.H, s.C, nil); err == nil || errors.Is(err, ErrTooLarge) {
			t.Errorf("Reserve(%v) = %v, want a shape error", s, err)
		}
	}
	if _, err := e.Reserve(ctx, 40, 40, 3, nil); !errors.Is(err, ErrTooLarge) {
		t.Errorf("Reserve over the slot = %v, want ErrTooLarge", err)
	}
	// A too-large image leaves the executor working.
	r, err := e.Reserve(ctx, 36, 36, 3, "ok") // 3888 bytes: fits alone
	if err != nil {
		t.Fatal(err)
	}
	r.Commit()
	e.CloseInput()
	if _, err := e.Reserve(ctx, 1, 1, 3, nil); !errors.Is(err, ErrInputClosed) {
		t.Errorf("Reserve after CloseInput = %v, want ErrInputClosed", err)
	}
	res := <-e.Results()
	if res == nil || res.Tag != "ok" {
		t.Fatalf("result %+v", res)
	}
	res.Release()
	res.Release() // twice is harmless
	if err := e.Wait(); err != nil {
		t.Fatal(err)
	}
	if e.FreeSlots() != e.Slots() {
		t.Errorf("double Release corrupted the free list: %d of %d", e.FreeSlots(), e.Slots())
	}
}

func TestLinger(t *testing.T) {
	for _, tt := range []struct {
		linger time.Duration
		sealed bool
	}{{5 * time.Millisecond, true}, {0, false}, {-1, false}} {
		dev := schedtest.NewFake(schedtest.FakeConfig{})
		e := startExec(t, context.Background(), dev, Config{Ops: []Op{GrayscaleOp()}, Streams: 2, Slots: 4, Batch: 8, SlotBytes: 4096, Linger: tt.linger})
		r, err := e.Reserve(context.Background(), 3, 3, 3, 1)
		if err != nil {
			t.Fatal(err)
		}
		r.Commit()
		select {
		case res := <-e.Results():
			if !tt.sealed {
				t.Errorf("linger %v: a partial batch went without Flush", tt.linger)
			}
			res.Release()
		case <-time.After(300 * time.Millisecond):
			if tt.sealed {
				t.Errorf("linger %v: partial batch never sealed", tt.linger)
			}
			e.Flush()
			res := <-e.Results()
			res.Release()
		}
		e.CloseInput()
		if err := e.Wait(); err != nil {
			t.Fatal(err)
		}
	}
}
