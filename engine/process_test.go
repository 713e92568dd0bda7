package engine_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/imgpipe/imgpipe/cudastage/sched/schedtest"
	"github.com/imgpipe/imgpipe/engine"
	"github.com/imgpipe/imgpipe/pipeline"
	"github.com/imgpipe/imgpipe/stages/stagestest"
)

// chains are what the tests send at once: pixel stages the fake GPU runs, a resize the
// thumbnails use, a report-only chain, and JPEG and PNG outputs.
var chains = []string{
	"decode | grayscale | save format=png",
	"decode | resize width=16 height=16 fit=inside | save format=jpeg quality=75",
	"decode | blur sigma=1 | grayscale | save format=png",
	"decode | histogram",
}

// Many concurrent requests of several chains at once give what pipeline.Run gives for the
// same chain and input, byte for byte, on the CPU and on the fake GPU; an input's own
// failure is its result, not an error.
func TestProcessMatchesRun(t *testing.T) {
	for _, c := range []struct {
		name string
		open func(t *testing.T) *engine.Engine
	}{
		{"cpu", func(t *testing.T) *engine.Engine { return openCPU(t, engine.Config{}, 3) }},
		{"fake gpu", func(t *testing.T) *engine.Engine {
			e, _ := openFake(t, engine.Config{}, 4, schedtest.FakeConfig{})
			return e
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := c.open(t)
			in := photos(t, 6, true)
			var wg sync.WaitGroup
			for _, spec := range chains {
				plan := compile(t, spec)
				wants := reference(t, plan, in)
				for rep := range 4 {
					for _, p := range in {
						wg.Add(1)
						go func() {
							defer wg.Done()
							res, err := e.Process(context.Background(), plan, p)
							if err == nil {
								err = wants[p.Name].check(res)
							}
							if err != nil {
								t.Errorf("%s, %s #%d: %v", spec, p.Name, rep, err)
							}
						}()
					}
				}
			}
			wg.Wait()
			s := e.Stats()
			total := uint64(len(chains) * 4 * len(in))
			if s.OK+s.Failed != total || s.Failed != uint64(len(chains)*4) || s.Errors != 0 || s.Queued != 0 {
				t.Errorf("stats %+v, want %d done, %d failed", s, total, len(chains)*4)
			}
		})
	}
}

// Engine errors: a full queue, too many chains and a closed engine refuse at once, and
// say which; a cancelled request returns its context's error.
func TestProcessErrors(t *testing.T) {
	g := newGate()
	defer g.release()
	held := g.compile(t, "decode | hold | save format=png")
	e := openCPU(t, engine.Config{Queue: 2, Chains: 1}, 1)
	in := photos(t, 1, false)[0]
	results := make(chan error, 2)
	for range 2 {
		go func() {
			_, err := e.Process(context.Background(), held, in)
			results <- err
		}()
	}
	waitFor(t, "2 requests admitted", func() bool { return e.Stats().Queued == 2 || len(results) > 0 })
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	for _, c := range []struct {
		name string
		plan *pipeline.Plan
		want error
		msg  string
	}{
		{"full queue", held, engine.ErrBusy, "requests are queued"},
		{"another chain", compile(t, "decode | save format=png"), engine.ErrBusy, "queued"},
		{"nil plan", nil, nil, "nil plan"},
	} {
		_, err := e.Process(context.Background(), c.plan, in)
		if err == nil || c.want != nil && !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%s: %v, want %v (%q)", c.name, err, c.want, c.msg)
		}
	}
	g.release()
	for range 2 {
		if err := <-results; err != nil {
			t.Error(err)
		}
	}
	// Chains 1: an idle chain gives way to another; one that holds a request does not.
	if res, err := e.Process(context.Background(), compile(t, "decode | grayscale | save format=png"), in); err != nil || res.Status != pipeline.StatusOK {
		t.Errorf("a second chain while the first is idle: %v %v", err, res.Err)
	}
	g2 := newGate()
	defer g2.release()
	go func() {
		_, err := e.Process(context.Background(), g2.compile(t, "decode | hold | grayscale | save format=png"), in)
		results <- err
	}()
	waitFor(t, "a request held", func() bool { return e.Stats().Queued == 1 || len(results) > 0 })
	if _, err := e.Process(context.Background(), held, in); !errors.Is(err, engine.ErrBusy) || !strings.Contains(err.Error(), "chains hold requests") {
		t.Errorf("a second chain while the first holds a request (chains 1): %v, want ErrBusy", err)
	}
	g2.release()
	if err := <-results; err != nil {
		t.Error(err)
	}
	if _, err := e.Process(cancelled, held, in); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
	if s := e.Stats(); s.Busy != 3 || s.Queued != 0 {
		t.Errorf("stats %+v, want 3 busy", s)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Process(context.Background(), held, in); !errors.Is(err, engine.ErrClosed) {
		t.Errorf("after Close: %v", err)
	}
	req, _ := folderJob(t, held, nil)
	if _, err := e.Run(context.Background(), req); !errors.Is(err, engine.ErrClosed) {
		t.Errorf("Run after Close: %v", err)
	}
	if err := e.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// One chain flooding the queue leaves room for the others: each request is admitted or
// refused as Config.Queue's shares say, whatever the order of the chains.
func TestFairShare(t *testing.T) {
	type step struct {
		chain int  // 0 or 1
		busy  bool // refused
	}
	ok0, busy0, ok1, busy1 := step{0, false}, step{0, true}, step{1, false}, step{1, true}
	for _, c := range []struct {
		name   string
		chains int
		steps  []step
	}{
		// Queue 8, Chains 3: 8/3 = 2 places are kept for chains that hold none while a
		// third chain may come; the other 6 are shared by the chains that hold some.
		{"a flood leaves room", 3, []step{ok0, ok0, ok0, ok0, ok0, ok0, busy0, ok1, ok1, busy1, busy0}},
		{"two chains share", 3, []step{ok0, ok1, ok0, ok1, ok0, ok1, busy0, busy1}},
		// With every chain resident, no place is kept: the 8 are shared.
		{"no chain to come", 2, []step{ok0, ok1, ok0, ok0, ok0, busy0, ok1, ok1, ok1, busy1}},
	} {
		t.Run(c.name, func(t *testing.T) {
			g := newGate()
			defer g.release()
			plans := []*pipeline.Plan{g.compile(t, "decode | hold | save format=png"), g.compile(t, "decode | hold | grayscale | save format=png")}
			e := openCPU(t, engine.Config{Queue: 8, Chains: c.chains}, 1)
			in := photos(t, 1, false)[0]
			results := make(chan error, len(c.steps))
			admitted := 0
			for i, s := range c.steps {
				if s.busy {
					if _, err := e.Process(context.Background(), plans[s.chain], in); !errors.Is(err, engine.ErrBusy) {
						t.Fatalf("step %d (chain %d): %v, want ErrBusy", i, s.chain, err)
					}
					continue
				}
				admitted++
				go func() {
					_, err := e.Process(context.Background(), plans[s.chain], in)
					results <- err
				}()
				waitFor(t, fmt.Sprintf("step %d admitted", i), func() bool { return e.Stats().Queued == admitted || len(results) > 0 })
				if len(results) > 0 {
					t.Fatalf("step %d (chain %d): %v", i, s.chain, <-results)
				}
			}
			g.release()
			for range admitted {
				if err := <-results; err != nil {
					t.Error(err)
				}
			}
		})
	}
}

// A cancelled request returns at once, wherever it is (queued, or in the run), and the
// requests beside it get their results.
func TestCancelOne(t *testing.T) {
	g := newGate()
	defer g.release()
	plan := g.compile(t, "decode | hold | save format=png")
	e := openCPU(t, engine.Config{}, 1)
	in := photos(t, 3, false)
	wants := reference(t, compile(t, "decode | save format=png"), in)
	type done struct {
		name string
		res  pipeline.Result
		err  error
	}
	results := make(chan done, len(in))
	cancels := make([]context.CancelFunc, len(in))
	for i, p := range in {
		ctx, cancel := context.WithCancel(context.Background())
		cancels[i] = cancel
		defer cancel()
		go func() {
			res, err := e.Process(ctx, plan, p)
			results <- done{p.Name, res, err}
		}()
		waitFor(t, "admitted", func() bool { return e.Stats().Queued == i+1 })
	}
	<-g.entered // one request is in the run; the others wait behind it (1 worker)
	for _, i := range []int{0, 2} {
		cancels[i]()
		if d := <-results; !errors.Is(d.err, context.Canceled) {
			t.Fatalf("cancelled %s: %v", d.name, d.err)
		}
	}
	g.release()
	d := <-results
	if d.err != nil || d.name != in[1].Name {
		t.Fatalf("%s: %v", d.name, d.err)
	}
	if err := wants[d.name].check(d.res); err != nil {
		t.Error(err)
	}
	waitFor(t, "the cancelled requests let go", func() bool { return e.Stats().Queued == 0 })
}

// On the CPU a request's result goes back as soon as it is done, not after those of the
// requests taken before it: a request behind one that is held is answered meanwhile.
func TestNoHeadOfLineBlocking(t *testing.T) {
	g := newGate()
	g.minWidth = 100
	defer g.release()
	plan := g.compile(t, "decode | hold | save format=png")
	e := openCPU(t, engine.Config{}, 2)
	wide := pipeline.Input{Name: "wide.png", Data: stagestest.Encode(t, stagestest.Smooth(120, 20, 1), "png")}
	held := make(chan error, 1)
	go func() {
		_, err := e.Process(context.Background(), plan, wide)
		held <- err
	}()
	<-g.entered
	in := photos(t, 4, false)
	wants := reference(t, compile(t, "decode | save format=png"), in)
	for _, p := range in {
		res, err := e.Process(context.Background(), plan, p)
		if err == nil {
			err = wants[p.Name].check(res)
		}
		if err != nil {
			t.Fatalf("%s: %v", p.Name, err)
		}
	}
	g.release()
	if err := <-held; err != nil {
		t.Fatal(err)
	}
}
