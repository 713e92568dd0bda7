package engine_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/imgpipe/imgpipe/cudastage/sched"
	"github.com/imgpipe/imgpipe/cudastage/sched/schedtest"
	"github.com/imgpipe/imgpipe/engine"
	"github.com/imgpipe/imgpipe/pipeline"
	"github.com/imgpipe/imgpipe/pipeline/folderrun"
	"github.com/imgpipe/imgpipe/stages"
	"github.com/imgpipe/imgpipe/stages/stagestest"
)

// openCPU opens an engine on the CPU with cfg's settings (Exec: the defaults on the
// CPU, with workers), closed when the test ends.
func openCPU(t *testing.T, cfg engine.Config, workers int) *engine.Engine {
	t.Helper()
	cfg.Exec = pipeline.DefaultExecution()
	cfg.Exec.Device, cfg.Exec.Workers = "cpu", workers
	return open(t, cfg)
}

// openFake opens an engine on one fake GPU (schedtest) with batches of batch images;
// fake is the device, for a test that looks at it.
func openFake(t *testing.T, cfg engine.Config, batch int, fc schedtest.FakeConfig) (e *engine.Engine, fake *schedtest.FakeDevice) {
	t.Helper()
	cfg.Exec = pipeline.DefaultExecution()
	cfg.Exec.Device, cfg.Exec.GPU, cfg.Exec.Batch, cfg.Exec.Workers = "cuda", "0", batch, 2
	cfg.Exec.PinnedMB = 4 // small images: slots sized for 1080p frames would only cost the test time
	var opened atomic.Int32
	cfg.GPUs.Open = func(int) (sched.Device, func() error, error) {
		if opened.Add(1) > 1 {
			return nil, nil, fmt.Errorf("the engine opened its GPU twice")
		}
		fake = schedtest.NewFake(fc)
		return fake, func() error { fake.Close(); return nil }, nil
	}
	e = open(t, cfg)
	if e.Device() != "fake" {
		t.Fatalf("engine on %q, want the fake GPU", e.Device())
	}
	return e, fake
}

func open(t *testing.T, cfg engine.Config) *engine.Engine {
	t.Helper()
	if cfg.Notice == nil {
		cfg.Notice = func(msg string) { t.Logf("notice: %s", msg) }
	}
	e, err := engine.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := e.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return e
}

// gate is a test-only stage, hold, that keeps every image in the chain until the gate
// opens: requests stay admitted, deterministically, for as long as a test needs.
type gate struct {
	entered chan struct{} // one send per image that reached hold
	open    chan struct{}
	once    sync.Once
	// minWidth, when set, makes hold keep only images at least this wide.
	minWidth int
}

func newGate() *gate { return &gate{entered: make(chan struct{}, 1024), open: make(chan struct{})} }

// release opens the gate; a test defers it too, so that a failing test's Close (in its
// cleanup) does not wait for images the gate holds.
func (g *gate) release() { g.once.Do(func() { close(g.open) }) }

// compile compiles spec with the builtin stages and hold.
func (g *gate) compile(t *testing.T, spec string) *pipeline.Plan {
	t.Helper()
	hold := &pipeline.StageDef{Name: "hold", Kind: pipeline.PixelKind, Help: "waits for the test's gate",
		Shape: func(in stages.Shape, _ pipeline.Params) (stages.Shape, bool) { return in, false },
		CPU: func(pipeline.Params) (pipeline.CPUFunc, error) {
			return func(dst, src *stages.Image, _ *[256]uint64) {
				if src.W >= g.minWidth {
					g.entered <- struct{}{}
					<-g.open
				}
				copy(dst.Pix, src.Pix)
			}, nil
		}}
	r, err := pipeline.NewRegistry(append(pipeline.Builtin.Stages(), hold)...)
	if err != nil {
		t.Fatal(err)
	}
	plan, err := r.CompileSpec(spec)
	if err != nil {
		t.Fatal(err)
	}
	return plan
}

func compile(t *testing.T, spec string) *pipeline.Plan {
	t.Helper()
	plan, err := pipeline.CompileSpec(spec)
	if err != nil {
		t.Fatal(err)
	}
	return plan
}

// photos are n small images of varied sizes and formats, and, when bad, a corrupt file
// that fails by itself.
func photos(t *testing.T, n int, bad bool) []pipeline.Input {
	t.Helper()
	var in []pipeline.Input
	for i := range n {
		format := []string{"png", "jpeg"}[i%2]
		m := stagestest.Smooth(24+4*i, 16+3*i, int64(i))
		in = append(in, pipeline.Input{Name: fmt.Sprintf("p%02d.%s", i, format), Data: stagestest.Encode(t, m, format)})
	}
	if bad {
		in = append(in, pipeline.Input{Name: "bad.png", Data: in[0].Data[:40]})
	}
	return in
}

// reference runs plan over in with pipeline.Run into a folder, on the CPU, as imgpipe run
// does, and returns each input's result and, for an ok one that saves, its file's bytes.
func reference(t *testing.T, plan *pipeline.Plan, in []pipeline.Input) map[string]want {
	t.Helper()
	out := t.TempDir()
	var got []pipeline.Result
	opt := pipeline.Options{Progress: func(r *pipeline.Result) { got = append(got, *r) }}
	sink := pipeline.Discard()
	if plan.Save != nil {
		sink = pipeline.ToFolder(out)
	}
	if _, err := pipeline.Run(context.Background(), plan, pipeline.Inputs(in...), sink, opt); err != nil {
		t.Fatal(err)
	}
	wants := map[string]want{}
	for _, r := range got {
		w := want{status: r.Status, width: r.Width, height: r.Height, hist: r.Histogram, encoder: r.Encoder}
		if r.Status == pipeline.StatusOK && plan.Save != nil {
			b, err := os.ReadFile(filepath.Join(out, r.Output))
			if err != nil {
				t.Fatal(err)
			}
			w.bytes = b
		}
		wants[r.Input] = w
	}
	return wants
}

type want struct {
	status        pipeline.Status
	width, height int
	hist          *[256]uint64
	bytes         []byte
	encoder       string
}

// check compares a request's result with the reference's.
func (w want) check(res pipeline.Result) error {
	switch {
	case res.Status != w.status:
		return fmt.Errorf("status %s (%v), want %s", res.Status, res.Err, w.status)
	case res.Width != w.width || res.Height != w.height:
		return fmt.Errorf("%d×%d, want %d×%d", res.Width, res.Height, w.width, w.height)
	case string(res.Encoded) != string(w.bytes):
		return fmt.Errorf("%d output bytes unlike run's %d", len(res.Encoded), len(w.bytes))
	case (res.Histogram == nil) != (w.hist == nil) || w.hist != nil && *res.Histogram != *w.hist:
		return fmt.Errorf("histogram unlike run's")
	case res.Encoder != w.encoder:
		return fmt.Errorf("encoder %q, want %q", res.Encoder, w.encoder)
	case res.Image != nil && res.Encoded != nil:
		return fmt.Errorf("the result keeps its image besides its bytes")
	}
	return nil
}

// waitFor waits until cond holds, polling: the tests synchronise on the engine's state,
// not on how long something takes. It fails after a minute, which only a hung engine
// needs.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("never: %s", what)
		}
		runtime.Gosched()
		time.Sleep(time.Millisecond)
	}
}

// folderJob writes in into a new folder and returns a folder run of plan from it.
func folderJob(t *testing.T, plan *pipeline.Plan, in []pipeline.Input) (folderrun.Request, string) {
	t.Helper()
	src, out := t.TempDir(), t.TempDir()
	for _, p := range in {
		if err := os.WriteFile(filepath.Join(src, p.Name), p.Data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	exec := pipeline.DefaultExecution()
	return folderrun.Request{Plan: plan, Input: src, Output: out, Exec: exec}, out
}
