package engine_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/imgpipe/imgpipe/cudastage/sched/schedtest"
	"github.com/imgpipe/imgpipe/engine"
)

// Concurrent single-image requests share device batches: with a delay bound far longer
// than the test, 64 requests of one image each go in full batches of 8, each sent as soon
// as it is full, without waiting for the bound.
func TestRequestsShareBatches(t *testing.T) {
	e, _ := openFake(t, engine.Config{Delay: time.Hour}, 8, schedtest.FakeConfig{})
	plan := compile(t, chains[0])
	in := photos(t, 2, false)
	wants := reference(t, plan, in)
	var wg sync.WaitGroup
	for i := range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := in[i%2]
			res, err := e.Process(context.Background(), plan, p)
			if err == nil {
				err = wants[p.Name].check(res)
			}
			if err != nil {
				t.Errorf("request %d: %v", i, err)
			}
		}()
	}
	wg.Wait()
	bs := e.Stats().BatchSizes
	if bs.Sum != 64 || bs.Counts[3] != 8 {
		t.Errorf("batch sizes %+v, want 8 batches of 8 images (bounds %v)", bs, bs.Bounds)
	}
}

// A partly filled batch goes after the delay bound, not only when full: a lone request
// is answered (a bound of an hour would hold it for an hour), and Close sends the batch
// of a request still waiting for others.
func TestLoneRequest(t *testing.T) {
	plan := compile(t, chains[0])
	in := photos(t, 1, false)
	wants := reference(t, plan, in)
	for _, c := range []struct {
		name  string
		delay time.Duration
		close bool // Close while the request waits: neither the delay nor the idle time passes
	}{
		{"default delay", 0, false},
		{"held until Close", time.Hour, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			e, fake := openFake(t, engine.Config{Delay: c.delay, Idle: time.Hour}, 8, schedtest.FakeConfig{})
			done := make(chan error, 1)
			go func() {
				res, err := e.Process(context.Background(), plan, in[0])
				if err == nil {
					err = wants[in[0].Name].check(res)
				}
				done <- err
			}()
			if c.close {
				waitFor(t, "the request in the run", func() bool { return e.Stats().Queued == 1 && fake.Calls()["HtoD"] == 0 })
				if err := e.Close(); err != nil {
					t.Fatal(err)
				}
			}
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			if bs := e.Stats().BatchSizes; bs.Sum != 1 || bs.Counts[0] != 1 {
				t.Errorf("batch sizes %+v, want one batch of 1 image", bs)
			}
		})
	}
}

// A device fault fails the requests in flight with the device's error, never hangs one,
// and fails no request by itself; a request after it starts a new resident run, which
// the broken device fails at once, again with an error.
func TestDeviceFault(t *testing.T) {
	leaks := goleak.IgnoreCurrent()
	var runs atomic.Int32
	e, _ := openFake(t, engine.Config{}, 4, schedtest.FakeConfig{KernelLatency: 50 * time.Microsecond,
		Fault: func(call string) error {
			if call == "Run grayscale" && runs.Add(1) == 3 {
				return errors.New("illegal address (injected)")
			}
			return nil
		}})
	plan := compile(t, chains[0])
	in := photos(t, 4, false)
	wants := reference(t, plan, in)
	var wg sync.WaitGroup
	var failed atomic.Int32
	for i := range 48 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := in[i%len(in)]
			res, err := e.Process(context.Background(), plan, p)
			switch {
			case err != nil && strings.Contains(err.Error(), "injected"):
				failed.Add(1)
			case err != nil:
				t.Errorf("request %d: %v, want the device's fault", i, err)
			default:
				if err := wants[p.Name].check(res); err != nil {
					t.Errorf("request %d: %v", i, err)
				}
			}
		}()
	}
	wg.Wait()
	s := e.Stats()
	if failed.Load() == 0 || s.Faults == 0 || s.Errors != uint64(failed.Load()) || !strings.Contains(s.DeviceError, "injected") {
		t.Fatalf("%d requests failed by the fault; stats %+v", failed.Load(), s)
	}
	faults := s.Faults
	if _, err := e.Process(context.Background(), plan, in[0]); err == nil || !strings.Contains(err.Error(), "injected") {
		t.Errorf("a request after the fault: %v, want the device's sticky error", err)
	}
	if s := e.Stats(); s.Faults != faults+1 || s.Queued != 0 {
		t.Errorf("stats %+v: want a new resident run, failed", s)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	goleak.VerifyNone(t, leaks) // the failed runs' executors and the fake's streams too
}

// A folder run (Run) on the engine's device while requests of two chains are served:
// each gets what it would alone.
func TestRunBesideRequests(t *testing.T) {
	e, _ := openFake(t, engine.Config{}, 4, schedtest.FakeConfig{})
	in := photos(t, 12, false)
	folderPlan := compile(t, chains[2])
	req, out := folderJob(t, folderPlan, in)
	req.Exec.Batch, req.Exec.PinnedMB = 4, 4
	wantFolder := reference(t, folderPlan, in)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		sum, err := e.Run(context.Background(), req)
		if err != nil || sum.OK != len(in) {
			t.Errorf("folder run: %v, %+v", err, sum)
			return
		}
		for _, p := range in {
			name := strings.TrimSuffix(p.Name, filepath.Ext(p.Name)) + ".png"
			b, err := os.ReadFile(filepath.Join(out, name))
			if err != nil || string(b) != string(wantFolder[p.Name].bytes) {
				t.Errorf("folder run: %s unlike pipeline.Run's (%v)", name, err)
			}
		}
	}()
	for _, spec := range chains[:2] {
		plan := compile(t, spec)
		wants := reference(t, plan, in)
		for i := range 24 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				p := in[i%len(in)]
				res, err := e.Process(context.Background(), plan, p)
				if err == nil {
					err = wants[p.Name].check(res)
				}
				if err != nil {
					t.Errorf("%s, request %d: %v", spec, i, err)
				}
			}()
		}
	}
	wg.Wait()
	if s := e.Stats(); s.Runs != 0 || s.OK != 48 || s.Faults != 0 || s.DeviceError != "" {
		t.Errorf("stats %+v", s)
	}
}
