package sched_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/imgpipe/imgpipe/cudastage/sched"
	"github.com/imgpipe/imgpipe/cudastage/sched/schedtest"

	"github.com/imgpipe/imgpipe/stages"
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
		imgs[i] = randImage(rng, sz[0], sz[1], c)
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
		if d := sameImage(r.Image, want); d != "" {
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
		if d := sameImage(r.Image, want); d != "" {
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

func TestCancelEndsEverything(t *testing.T) {
	base := runtime.NumGoroutine()
	dev := schedtest.NewFake(schedtest.FakeConfig{H2DRate: 5e6, D2HRate: 5e6, KernelLatency: 200 * time.Microsecond})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ops := []Op{GrayscaleOp(), MustBlurOp(t, 2), TransposeOp(), HistogramOp()}
	e, err := New(ctx, dev, Config{Ops: ops, Streams: 3, Slots: 5, Batch: 3, SlotBytes: 40000, Linger: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	rng := rand.New(rand.NewPCG(9, 9))
	img := randImage(rng, 33, 65, 3)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				r, err := e.Reserve(ctx, img.W, img.H, img.C, nil)
				if err != nil {
					return
				}
				copy(r.Image().Pix, img.Pix)
				time.Sleep(100 * time.Microsecond) // a decode, in progress at cancel
				r.Commit()
			}
		}()
	}
	n := 0
	for r := range e.Results() {
		time.Sleep(200 * time.Microsecond)
		r.Release()
		if n++; n == 20 {
			cancel()
		}
	}
	wg.Wait()
	if err := e.Wait(); !errors.Is(err, context.Canceled) {
		t.Errorf("Wait = %v, want context.Canceled", err)
	}
	if n := e.FreeSlots(); n != 5 {
		t.Errorf("%d of 5 slots free after cancel: slot leaked", n)
	}
	if err := e.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if live := dev.Live(); live != (schedtest.FakeLive{}) {
		t.Errorf("device objects left: %+v", live)
	}
	dev.Close()
	goroutinesBack(t, base)
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
		if d := sameImage(r.Image, want); d != "" || *r.Hist != *wantHist {
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
		m := randImage(rng, sz[0], sz[1], 3)
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
		if d := sameImage(r.Image, ref); d != "" {
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

// poisonTable breaks one launch table, as a bad offset would on a GPU.
type poisonTable struct {
	*schedtest.FakeDevice
	n atomic.Int64
}

func (p *poisonTable) EncodeTable(call *OpCall, dst []byte) error {
	if err := p.FakeDevice.EncodeTable(call, dst); err != nil {
		return err
	}
	if p.n.Add(1) == 3 {
		dst[7] = 0x40 // first image's source offset += 2^62
	}
	return nil
}

func TestFatalDeviceError(t *testing.T) {
	nth := func(call string, n int64) func(string) error {
		var count atomic.Int64
		return func(c string) error {
			if c == call && count.Add(1) == n {
				return errors.New("injected illegal address")
			}
			return nil
		}
	}
	tests := []struct {
		name    string
		fault   func(string) error
		poison  bool
		wantMsg string
	}{
		{name: "kernel", fault: nth("Run blur", 3), wantMsg: "injected"},
		{name: "h2d", fault: nth("HtoD", 4), wantMsg: "injected"},
		{name: "d2h", fault: nth("DtoH", 2), wantMsg: "injected"},
		{name: "stream wait", fault: nth("StreamWait", 5), wantMsg: "injected"},
		{name: "poisoned table", poison: true, wantMsg: "illegal address"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			base := runtime.NumGoroutine()
			fake := schedtest.NewFake(schedtest.FakeConfig{Fault: tt.fault, CopyLatency: 50 * time.Microsecond})
			var dev Device = fake
			if tt.poison {
				dev = &poisonTable{FakeDevice: fake}
			}
			ops := []Op{GrayscaleOp(), MustBlurOp(t, 1), HistogramOp()}
			e, err := New(context.Background(), dev, Config{Ops: ops, Streams: 3, Slots: 4, Batch: 2, SlotBytes: 1 << 15, Linger: time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			imgs := mixedImages(4, 200)
			errc := make(chan error, 1)
			go func() { errc <- pushAll(context.Background(), e, imgs, 3) }()
			n := 0
			for r := range e.Results() {
				n++
				r.Release()
			}
			werr := e.Wait()
			var fe *schedtest.FakeError
			if !errors.As(werr, &fe) || !fe.Sticky() || !strings.Contains(werr.Error(), tt.wantMsg) {
				t.Fatalf("Wait = %v, want a sticky device error with %q", werr, tt.wantMsg)
			}
			if n >= len(imgs) {
				t.Errorf("all %d images delivered despite the fault", n)
			}
			if perr := <-errc; perr != nil && !errors.Is(perr, werr) && !errors.Is(perr, ErrInputClosed) {
				t.Errorf("Reserve after the fault: %v, want the device error", perr)
			}
			if _, err := e.Reserve(context.Background(), 2, 2, 3, nil); !errors.As(err, &fe) {
				t.Errorf("Reserve after stop = %v, want the device error", err)
			}
			e.Close()
			fake.Close()
			goroutinesBack(t, base)
		})
	}
}

func TestNewFailsCleanly(t *testing.T) {
	ops := []Op{GrayscaleOp(), HistogramOp()}
	for _, call := range []string{"NewStream", "NewEvent", "HostAlloc", "DevAlloc"} {
		for _, n := range []int64{1, 4} {
			t.Run(fmt.Sprintf("%s#%d", call, n), func(t *testing.T) {
				var count atomic.Int64
				dev := schedtest.NewFake(schedtest.FakeConfig{Fault: func(c string) error {
					if c == call && count.Add(1) == n {
						return errors.New("no memory")
					}
					return nil
				}})
				defer dev.Close()
				// Four streams, so that the 4th NewStream is called.
				e, err := New(context.Background(), dev, Config{Ops: ops, Streams: 4, Slots: 3, Batch: 2, SlotBytes: 4096, Linger: 20 * time.Millisecond})
				if err == nil {
					e.Close()
					t.Fatal("New succeeded despite the fault")
				}
				if !strings.Contains(err.Error(), "no memory") {
					t.Errorf("New error %v", err)
				}
				if live := dev.Live(); live != (schedtest.FakeLive{}) {
					t.Errorf("left after a failed New: %+v", live)
				}
			})
		}
	}
	// Out of device memory (not sticky) is an error too.
	dev := schedtest.NewFake(schedtest.FakeConfig{MaxDeviceBytes: 10000})
	defer dev.Close()
	if _, err := New(context.Background(), dev, Config{Ops: ops, Streams: 4, Slots: 3, Batch: 2, SlotBytes: 4096, Linger: 20 * time.Millisecond}); err == nil || !strings.Contains(err.Error(), "out of memory") {
		t.Errorf("New over device memory: %v", err)
	}
	if live := dev.Live(); live != (schedtest.FakeLive{}) {
		t.Errorf("left after a failed New: %+v", live)
	}
}

func TestConfigErrors(t *testing.T) {
	ops := []Op{GrayscaleOp()}
	// with is a valid config but for what set changes, so that each case
	// fails for its own reason only.
	with := func(set func(*Config)) Config {
		c := testConfig(ops)
		set(&c)
		return c
	}
	zero := []string{ // the messages of zero Streams, Slots, Batch and SlotBytes
		fmt.Sprintf("streams 0 out of range [1, %d]", MaxStreams),
		fmt.Sprintf("slots 0 out of range [1, %d]", MaxSlots),
		fmt.Sprintf("batch 0 out of range [1, %d]", MaxBatch),
		fmt.Sprintf("slot bytes 0 out of range [%d, %d]", Align, MaxSlotBytes),
	}
	tests := []struct {
		cfg  Config
		want []string // one line of the error each
	}{
		{with(func(c *Config) { c.Ops = nil }), []string{"no ops"}},
		{with(func(c *Config) { c.Ops = []Op{{Name: "boxblur"}} }), []string{"no CPU function"}},
		{with(func(c *Config) { c.Streams = -1 }), []string{"streams"}},
		{with(func(c *Config) { c.Streams = MaxStreams + 1 }), []string{"streams"}},
		{with(func(c *Config) { c.Slots = -3 }), []string{"slots"}},
		{with(func(c *Config) { c.Slots = MaxSlots + 1 }), []string{"slots"}},
		{with(func(c *Config) { c.Batch = MaxBatch + 1 }), []string{"batch"}},
		{with(func(c *Config) { c.SlotBytes = 100 }), []string{"slot bytes"}},
		{with(func(c *Config) { c.SlotBytes = MaxSlotBytes + 1 }), []string{"slot bytes"}},
		{with(func(c *Config) { c.Slots, c.SlotBytes, c.MaxHostBytes = 4, 1<<20, 4<<20 }), []string{"page-locked"}},
		{with(func(c *Config) { c.Slots, c.SlotBytes, c.MaxDeviceBytes = 4, 1<<20, 4<<20 }), []string{"device memory"}},
		// The executor has no defaults: a zero field is refused, not filled.
		{with(func(c *Config) { c.Streams = 0 }), zero[0:1]},
		{with(func(c *Config) { c.Slots = 0 }), zero[1:2]},
		{with(func(c *Config) { c.Batch = 0 }), zero[2:3]},
		{with(func(c *Config) { c.SlotBytes = 0 }), zero[3:4]},
		{Config{Ops: ops}, zero}, // every problem is reported
	}
	for _, tt := range tests {
		dev := schedtest.NewFake(schedtest.FakeConfig{})
		_, err := New(context.Background(), dev, tt.cfg)
		if err == nil || strings.Count(err.Error(), "\n") != len(tt.want)-1 {
			t.Errorf("New(%+v) = %v, want an error of %d line(s) about %q", tt.cfg, err, len(tt.want), tt.want)
		}
		for _, want := range tt.want {
			if err != nil && !strings.Contains(err.Error(), want) {
				t.Errorf("New(%+v) = %v, want an error about %q", tt.cfg, err, want)
			}
		}
		if c := dev.Calls(); len(c) != 0 || dev.Live() != (schedtest.FakeLive{}) {
			t.Errorf("New(%+v) used the device before refusing: %v %+v", tt.cfg, c, dev.Live())
		}
		dev.Close()
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

func TestCloseWithHeldResults(t *testing.T) {
	dev := schedtest.NewFake(schedtest.FakeConfig{})
	e, err := New(context.Background(), dev, Config{Ops: []Op{GrayscaleOp()}, Streams: 2, Slots: 2, Batch: 1, SlotBytes: 4096, Linger: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	imgs := mixedImages(8, 2)
	commitAll(t, e, imgs)
	held := <-e.Results() // the other stays undelivered: Close drains it
	e.CloseInput()
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if live := dev.Live(); live.HostBufs == 0 || live.Streams != 0 {
		t.Fatalf("after Close with a held result: %+v, want only the held slot's memory", live)
	}
	want, _ := cpuRef([]Op{GrayscaleOp()}, imgs[held.Tag.(int)])
	if d := sameImage(held.Image, want); d != "" {
		t.Errorf("held result after Close: %s", d)
	}
	held.Release()
	if live := dev.Live(); live != (schedtest.FakeLive{}) {
		t.Errorf("after the last Release: %+v", live)
	}
	if err := e.Close(); err != nil { // twice is harmless
		t.Error(err)
	}
	dev.Close()
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
