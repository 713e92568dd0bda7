package pipeline

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"sync/atomic"
	"testing"
	"time"

	"github.com/imgpipe/imgpipe/stages"
	"github.com/imgpipe/imgpipe/stages/stagestest"
)

func TestMemBudgetAcquire(t *testing.T) {
	b := newMemBudget(100) // 100 bytes
	ctx := context.Background()

	// An image larger than the whole budget takes all of it, so it still runs (alone).
	big, err := b.acquire(ctx, 1000)
	if err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if _, err := b.acquire(short, 1); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("acquire with the budget used up = %v, want it to wait until the deadline", err)
	}
	big()

	// Two charges of 50 bytes fit together; a third waits for one of them.
	r1, _ := b.acquire(ctx, 50)
	r2, _ := b.acquire(ctx, 50)
	got := make(chan struct{})
	go func() {
		r3, err := b.acquire(ctx, 50)
		if err == nil {
			r3()
		}
		close(got)
	}()
	select {
	case <-got:
		t.Fatal("a third 50-byte charge got memory while two held the whole budget")
	case <-time.After(20 * time.Millisecond):
	}
	r1()
	<-got
	r2()

	// Nothing to charge and a disabled budget never wait; an unknown charge (-1) takes the
	// whole budget.
	if rel, err := b.acquire(ctx, 0); err != nil {
		t.Fatal(err)
	} else {
		rel()
	}
	if rel, err := newMemBudget(-1).acquire(ctx, 1<<40); err != nil {
		t.Fatal(err)
	} else {
		rel()
	}
	if d := newMemBudget(0); d.max != DefaultMemoryBudget {
		t.Fatalf("budget 0 = %d bytes, want the default %d", d.max, DefaultMemoryBudget)
	}
}

// TestRunMemoryBudget checks that the budget bounds how many images are decoded and
// processed at once, whatever the number of workers, and that every input still completes.
func TestRunMemoryBudget(t *testing.T) {
	rng := rand.New(rand.NewSource(7))
	const w, h = 40, 30
	var inputs []Input
	for i := 0; i < 24; i++ {
		inputs = append(inputs, Input{Name: fmt.Sprintf("%02d.png", i), Data: stagestest.Encode(t, stagestest.ReadImage(rng, w, h, 3), "png")})
	}
	// What one input is charged: its decoding and the chain's buffers (its bytes are the
	// caller's).
	c, err := Builtin.Compile(mustSteps(t, "decode"))
	if err != nil {
		t.Fatal(err)
	}
	cost, err := c.Decode.Cost(inputs[0].Data, int64(len(inputs[0].Data)))
	if err != nil {
		t.Fatal(err)
	}
	one := cost.WorkBytes + w*h*ChainBytesPerPixel
	tests := []struct {
		name    string
		budget  int64
		maxLive int64 // the most images the budget lets in at once
	}{
		{"one image at a time", one, 1},
		{"two at a time", 2*one + 1, 2},
		{"smaller than one image", 10, 1},
		// Without a budget the workers do overlap: this shows the cases above can fail.
		{"off", -1, 6},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			plan := compileWith(t, Builtin, "decode | grayscale | blur sigma=2 | histogram")
			var live, peak atomic.Int64
			dec := *plan.Decode
			inner := dec.Decode
			dec.Decode = func(data []byte, alloc stages.Alloc) (*stages.Image, Decoded, error) {
				n := live.Add(1)
				for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
				}
				time.Sleep(2 * time.Millisecond) // let other workers try to overlap
				return inner(data, alloc)
			}
			plan.Decode = &dec
			sink := Collect()
			done := &countingSink{Sink: sink, live: &live}
			sum, err := Run(context.Background(), plan, Inputs(inputs...), done, Options{Workers: 6, MemoryBudget: tt.budget})
			if err != nil || sum.OK != len(inputs) {
				t.Fatalf("Run = %+v, %v; want %d ok", sum, err, len(inputs))
			}
			if p := peak.Load(); p > tt.maxLive {
				t.Fatalf("%d images were in flight at once, the budget allows %d", p, tt.maxLive)
			}
			if p := peak.Load(); tt.budget < 0 && p < 2 {
				t.Fatalf("without a budget at most %d image was in flight; the test cannot see a budget's effect", p)
			}
		})
	}
}

// countingSink marks an image as done when the sink has it, which is when its worker is about
// to give its memory back.
type countingSink struct {
	Sink
	live *atomic.Int64
}

func (s *countingSink) Write(ctx context.Context, res *Result, enc *Encoder) error {
	defer s.live.Add(-1)
	return s.Sink.Write(ctx, res, enc)
}
