package engine_test

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/imgpipe/imgpipe/engine"
	"github.com/imgpipe/imgpipe/pipeline"
)

// Close drains: the requests in flight when it is called get their results, those that
// come after get ErrClosed, and no goroutine of the engine is left when it returns.
func TestCloseDrains(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	g := newGate()
	defer g.release()
	plan := g.compile(t, "decode | hold | save format=png")
	other := compile(t, "decode | save format=png")
	exec := pipeline.DefaultExecution()
	exec.Device, exec.Workers = "cpu", 2
	e, err := engine.Open(engine.Config{Exec: exec})
	if err != nil {
		t.Fatal(err)
	}
	in := photos(t, 4, false)
	wants := reference(t, other, in)
	type done struct {
		name string
		res  pipeline.Result
		err  error
	}
	results := make(chan done, len(in))
	for _, p := range in {
		go func() {
			res, err := e.Process(context.Background(), plan, p)
			results <- done{p.Name, res, err}
		}()
	}
	waitFor(t, "every request admitted", func() bool { return e.Stats().Queued == len(in) })
	closed := make(chan error, 1)
	go func() { closed <- e.Close() }()
	// Requests of another chain go through until Close has begun.
	for {
		_, err := e.Process(context.Background(), other, in[0])
		if errors.Is(err, engine.ErrClosed) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	g.release()
	for range in {
		d := <-results
		if d.err == nil {
			d.err = wants[d.name].check(d.res)
		}
		if d.err != nil {
			t.Errorf("%s: %v", d.name, d.err)
		}
	}
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	if s := e.Stats(); s.Queued != 0 || s.Chains != 0 || s.Errors != 0 {
		t.Errorf("stats after Close %+v", s)
	}
}

// A lane retires after Config.Idle without requests, and a request that comes while it
// retires is served by it or by the next: with an idle time of a nanosecond, lanes retire
// between most requests of two chains sent at once, and every request is answered.
func TestIdleLanesRetire(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	exec := pipeline.DefaultExecution()
	exec.Device, exec.Workers = "cpu", 2
	// A queue that no chain's share of binds: a client's ErrBusy is another test's.
	e, err := engine.Open(engine.Config{Exec: exec, Idle: time.Nanosecond, Queue: 1024})
	if err != nil {
		t.Fatal(err)
	}
	in := photos(t, 2, false)
	plans := []*pipeline.Plan{compile(t, chains[0]), compile(t, chains[2])}
	wants := []map[string]want{reference(t, plans[0], in), reference(t, plans[1], in)}
	var wg sync.WaitGroup
	for i := range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 4 {
				c, p := (i+j)%2, in[i%2]
				res, err := e.Process(context.Background(), plans[c], p)
				if err == nil {
					err = wants[c][p.Name].check(res)
				}
				if err != nil {
					t.Errorf("request %d.%d: %v", i, j, err)
				}
			}
		}()
	}
	wg.Wait()
	waitFor(t, "the idle lanes retired", func() bool { return e.Stats().Chains == 0 })
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
}

// The engine keeps nothing of a request once it is answered: the heap after many
// requests is what it was after a few, whatever the inputs' and outputs' bytes add up to.
func TestNothingKept(t *testing.T) {
	e := openCPU(t, engine.Config{}, 2)
	plan := compile(t, "decode | grayscale | save format=png")
	in := photos(t, 8, false)
	send := func(n int) (bytes int) {
		var wg sync.WaitGroup
		var mu sync.Mutex
		for w := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := w; i < n; i += 4 {
					// A fresh copy each time, so that a kept input would be kept memory.
					p := in[i%len(in)]
					p.Data = append([]byte(nil), p.Data...)
					res, err := e.Process(context.Background(), plan, p)
					if err != nil || res.Status != pipeline.StatusOK {
						t.Errorf("request %d: %v %v", i, err, res.Err)
						return
					}
					mu.Lock()
					bytes += len(p.Data) + len(res.Encoded)
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		return bytes
	}
	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	send(100)
	before := heap()
	moved := send(2000)
	after := heap()
	if grew := int64(after) - int64(before); grew > int64(moved)/4 {
		t.Errorf("the heap grew by %d bytes over requests of %d bytes in and out", grew, moved)
	}
	t.Logf("heap %d → %d bytes over %d bytes of requests", before, after, moved)
}
