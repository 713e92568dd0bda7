package sched_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	. "github.com/imgpipe/imgpipe/cudastage/sched"
	"github.com/imgpipe/imgpipe/cudastage/sched/schedtest"

	"github.com/imgpipe/imgpipe/stages/stagestest"
)

// meeting is a FakeConfig.DecodeBlock that holds the first want decode calls
// until all of them are in, and lets later calls through. It proves that want
// decodes run at once without asserting any time: when the executor cannot
// run them at once, the first call gives up after patience and the meeting
// records the failure.
type meeting struct {
	want     int
	patience time.Duration

	mu     sync.Mutex
	in     int
	all    chan struct{}
	failed error
}

func newMeeting(want int) *meeting {
	return &meeting{want: want, patience: 10 * time.Second, all: make(chan struct{})}
}

func (m *meeting) block() {
	m.mu.Lock()
	m.in++
	if m.in == m.want {
		close(m.all)
	}
	m.mu.Unlock()
	select {
	case <-m.all:
	case <-time.After(m.patience):
		m.mu.Lock()
		if m.failed == nil {
			m.failed = fmt.Errorf("only %d of %d decode calls met", m.in, m.want)
		}
		m.mu.Unlock()
	}
}

func (m *meeting) err() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.failed
}

// TestDecodesOverlapAcrossStreams: a decode call that blocks its host thread
// (as nvJPEG's batched decode does) holds up only its own stream, so as many
// decodes run at once as there are streams, and never more (each stream's
// decoder state serves one call at a time). Results still come in input order
// with the right pixels, and the decoder is warmed up once per stream only
// when the caller asks.
func TestDecodesOverlapAcrossStreams(t *testing.T) {
	cases := []struct {
		streams, batch int
		warm           bool
	}{
		{1, 1, true},
		{2, 1, false},
		{4, 1, true},
		{3, 2, true},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("streams=%d/batch=%d/warm=%v", c.streams, c.batch, c.warm), func(t *testing.T) {
			t.Parallel()
			meet := newMeeting(c.streams)
			dev := schedtest.NewFake(schedtest.FakeConfig{CopyLatency: 20 * time.Microsecond, DecodeBlock: meet.block})
			defer dev.Close()
			ctx := context.Background()
			ops := []Op{GrayscaleOp(), TransposeOp(), HistogramOp()}
			e, err := New(ctx, dev, Config{Ops: ops, Streams: c.streams, Slots: c.streams + 2, Batch: c.batch,
				SlotBytes: 1 << 18, WarmDecoder: c.warm})
			if err != nil {
				t.Fatal(err)
			}
			rng := rand.New(rand.NewPCG(3, uint64(c.streams)))
			var in []input
			for i := range 6 * c.streams * c.batch {
				in = append(in, input{file: jpegFile(t, rng, 16+i%7, 9+i%5)})
			}
			pushed := make(chan error, 1)
			go func() { pushed <- pushInputs(ctx, e, dev, in) }()
			next := 0
			for r := range e.Results() {
				if tag := r.Tag.(int); tag != next {
					t.Errorf("result %d came as number %d: out of order", tag, next)
				}
				next++
				want, wantHist := cpuRef(ops, decoded(t, in[r.Tag.(int)]))
				switch {
				case r.Err != nil:
					t.Errorf("input %v: %v", r.Tag, r.Err)
				case stagestest.Diff(r.Image, want) != "":
					t.Errorf("input %v: %s", r.Tag, stagestest.Diff(r.Image, want))
				case *r.Hist != *wantHist:
					t.Errorf("input %v: histogram differs", r.Tag)
				}
				r.Release()
			}
			if err := <-pushed; err != nil {
				t.Fatal(err)
			}
			if err := e.Wait(); err != nil {
				t.Fatal(err)
			}
			if next != len(in) {
				t.Errorf("%d results for %d inputs", next, len(in))
			}
			if err := meet.err(); err != nil {
				t.Errorf("decodes did not overlap across %d streams: %v", c.streams, err)
			}
			if got := dev.PeakDecodes(); got != c.streams {
				t.Errorf("%d decode calls at once, want %d (one per stream)", got, c.streams)
			}
			wantWarm := 0
			if c.warm {
				wantWarm = c.streams
			}
			if got := dev.Calls()["WarmDecoder"]; got != wantWarm {
				t.Errorf("WarmDecoder called %d times, want %d", got, wantWarm)
			}
			if st := e.Stats(); st.Files != int64(len(in)) || st.Batches != int64(len(in)/c.batch) {
				t.Errorf("stats: %d files in %d batches, want %d in %d", st.Files, st.Batches, len(in), len(in)/c.batch)
			}
			if err := e.Close(); err != nil {
				t.Fatal(err)
			}
			if live := dev.Live(); live != (schedtest.FakeLive{}) {
				t.Errorf("device objects left: %+v", live)
			}
		})
	}
}

// TestWarmDecoderFailure: a device failure while warming the decoder up is
// fatal like any device error; a decoder that cannot load is not (its files
// fail one by one when decoded).
func TestWarmDecoderFailure(t *testing.T) {
	boom := errors.New("warm-up failed")
	cases := []struct {
		name    string
		cfg     schedtest.FakeConfig
		wantErr error
		calls   int
	}{
		{"fault", schedtest.FakeConfig{Fault: func(call string) error {
			if call == "WarmDecoder" {
				return boom
			}
			return nil
		}}, boom, 0},
		{"decoder unavailable", schedtest.FakeConfig{DecoderUnavailable: errors.New("no nvJPEG")}, nil, 0},
		{"healthy", schedtest.FakeConfig{}, nil, 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			base := 0
			dev := schedtest.NewFake(c.cfg)
			defer dev.Close()
			e, err := New(context.Background(), dev, Config{Ops: []Op{GrayscaleOp()}, Streams: 2, Slots: 4, Batch: 2,
				SlotBytes: 1 << 16, WarmDecoder: true})
			if err != nil {
				t.Fatal(err)
			}
			e.CloseInput()
			for r := range e.Results() {
				base++
				r.Release()
			}
			if err := e.Wait(); !errors.Is(err, c.wantErr) || (c.wantErr == nil && err != nil) {
				t.Errorf("Wait = %v, want %v", err, c.wantErr)
			}
			if base != 0 {
				t.Errorf("%d results without input", base)
			}
			if got := dev.Calls()["WarmDecoder"]; got != c.calls {
				t.Errorf("WarmDecoder counted %d times, want %d", got, c.calls)
			}
			if err := e.Close(); err != nil {
				t.Fatal(err)
			}
			if live := dev.Live(); live != (schedtest.FakeLive{}) {
				t.Errorf("device objects left: %+v", live)
			}
		})
	}
}

// BenchmarkDecodeOverlap runs files through the executor on a fake device
// whose decode blocks its host thread for 10 ms per batch call (as nvJPEG's
// batched hardware decode does): img/s should grow with the streams, since
// each stream's goroutine decodes its batches while the others decode theirs.
func BenchmarkDecodeOverlap(b *testing.B) {
	const batch = 4
	rng := rand.New(rand.NewPCG(5, 5))
	var in []input
	for range 32 * batch {
		in = append(in, input{file: jpegFile(b, rng, 32, 24)})
	}
	for _, streams := range []int{1, 2, 4} {
		b.Run(fmt.Sprintf("streams=%d", streams), func(b *testing.B) {
			dev := schedtest.NewFake(schedtest.FakeConfig{DecodeBlock: func() { time.Sleep(10 * time.Millisecond) }})
			defer dev.Close()
			ctx := context.Background()
			images := 0
			b.ResetTimer()
			for b.Loop() {
				e, err := New(ctx, dev, Config{Ops: []Op{GrayscaleOp()}, Streams: streams, Slots: streams + 2,
					Batch: batch, SlotBytes: 1 << 16})
				if err != nil {
					b.Fatal(err)
				}
				pushed := make(chan error, 1)
				go func() { pushed <- pushInputs(ctx, e, dev, in) }()
				for r := range e.Results() {
					if r.Err != nil {
						b.Fatal(r.Err)
					}
					images++
					r.Release()
				}
				if err := <-pushed; err != nil {
					b.Fatal(err)
				}
				if err := e.Close(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(images)/b.Elapsed().Seconds(), "img/s")
		})
	}
}
