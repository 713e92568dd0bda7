package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/imgpipe/imgpipe/pipeline"
	"github.com/imgpipe/imgpipe/pipeline/gpu"
)

// A lane is one chain's resident run: a pipeline.Run whose source is the chain's requests
// and whose sink hands each result back to its request. While it runs, its workers, and on
// a GPU its executor, streams and slots, stay up, so a request pays none of their start,
// and the images of concurrent requests share device batches within Config.Delay.
type lane struct {
	e     *Engine
	key   string
	plan  *pipeline.Plan
	queue chan *request // requests not yet taken by the run
	stop  chan struct{} // closed by halt: the run ends once its queue is empty
	// stopOnce closes stop: Close and a new chain that the lane gives way to may both.
	stopOnce sync.Once
	// held is the chain's requests admitted and not yet done, for its share of the queue;
	// like Engine.held it grows only under e.mu.
	held atomic.Int64

	mu     sync.Mutex
	queued int              // requests counted for the queue and not yet taken from it
	taken  map[int]*request // requests in the run, by input index
	next   int              // the index of the next input taken
}

// A request is one Process call's input and where its outcome goes.
type request struct {
	ctx   context.Context
	in    pipeline.Input
	out   chan outcome // buffered: the run never waits for a caller that left
	start time.Time
}

type outcome struct {
	res pipeline.Result
	err error
}

// admit admits a request of plan's chain: it returns the chain's running lane, started if
// there is none, with the request counted in it, in the queue and in e.work. ErrClosed and
// ErrBusy are the reasons it may not.
func (e *Engine) admit(plan *pipeline.Plan) (*lane, error) {
	key := plan.String()
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return nil, ErrClosed
	}
	l := e.lanes[key]
	idle, err := e.full(l)
	if err != nil {
		e.stats.busy.Add(1)
		return nil, err
	}
	if l == nil {
		if idle != nil {
			// At Config.Chains, a lane that holds no request gives way: it ends
			// once its run has finished, and no request can be counted in it now.
			delete(e.lanes, idle.key)
			idle.halt()
		}
		l = &lane{e: e, key: key, plan: plan, queue: make(chan *request, e.cfg.Queue), stop: make(chan struct{}), taken: map[int]*request{}}
		e.lanes[key] = l
		e.lanesWG.Add(1)
		go l.run()
	}
	l.mu.Lock()
	l.queued++
	l.mu.Unlock()
	l.held.Add(1)
	e.held.Add(1)
	e.work.Add(1)
	return l, nil
}

// full says why a request of lane l's chain (nil: a chain without a lane) cannot be
// admitted now, or nil when it can; see Config.Queue for the shares. A new chain at
// Config.Chains is admitted when a lane holds no request: that lane is returned, to give
// way. e.mu must be held.
func (e *Engine) full(l *lane) (idle *lane, err error) {
	q := e.cfg.Queue
	holders := int64(1) // l's chain, and those of the other lanes that hold requests
	for _, o := range e.lanes {
		switch {
		case o == l:
		case o.held.Load() > 0:
			holders++
		case idle == nil:
			idle = o
		}
	}
	if e.held.Load() >= int64(q) {
		return nil, fmt.Errorf("%w: %d requests are queued, the most at once", ErrBusy, q)
	}
	if l == nil {
		switch {
		case len(e.lanes) < e.cfg.Chains:
			return nil, nil
		case idle == nil:
			return nil, fmt.Errorf("%w: %d chains hold requests, the most at once", ErrBusy, e.cfg.Chains)
		}
		return idle, nil
	}
	held := l.held.Load()
	if held == 0 {
		return nil, nil // the places kept for chains that hold none
	}
	kept := 0
	if len(e.lanes) < e.cfg.Chains || idle != nil { // else no other chain can come
		kept = q / e.cfg.Chains
	}
	if share := max(1, int64(q-kept)/holders); held >= share {
		return nil, fmt.Errorf("%w: the chain holds %d requests, its share of the queue", ErrBusy, held)
	}
	return nil, nil
}

// halt tells the lane's run to end once its queue is empty (Engine.Close, or a lane that
// gave way to another chain).
func (l *lane) halt() { l.stopOnce.Do(func() { close(l.stop) }) }

// run is the lane's pipeline.Run, until it has been idle for Config.Idle or the engine
// closes; a run that fails (a device fault) fails the requests it holds, and the next
// request starts a new lane.
func (l *lane) run() {
	defer l.e.lanesWG.Done()
	_, err := pipeline.Run(context.Background(), l.plan, l, l, l.options())
	if err != nil {
		l.e.stats.fault(err)
		if l.e.cfg.Notice != nil {
			l.e.cfg.Notice(fmt.Sprintf("the resident run of %q failed: %v", l.key, err))
		}
	} else {
		// Every request taken was reported and none is queued once Next retired the
		// lane: this is only a guard against one left waiting forever.
		err = errors.New("engine: the resident run ended without the request's result")
	}
	l.e.mu.Lock()
	if l.e.lanes[l.key] == l {
		delete(l.e.lanes, l.key)
	}
	l.e.mu.Unlock()
	// No request is counted for the queue once the lane is gone from the map, but those
	// counted before may still be on their way into it.
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, r := range l.taken {
		delete(l.taken, i)
		l.deliverLocked(r, outcome{err: err})
	}
	for ; l.queued > 0; l.queued-- {
		l.deliverLocked(<-l.queue, outcome{err: err})
	}
}

// options are the lane's run options: the engine's settings, on its devices and pools,
// with batches that wait Config.Delay at most. Only a GPU run is traced: the meter takes
// device batches from its spans, and a CPU run's spans would cost and tell it nothing.
// On the CPU, where Write answers a request as soon as it is done, the window is the
// queue: the inputs taken and not yet reported in order are requests already answered or
// admitted anyway, and a smaller window would hold the requests behind a slow one.
func (l *lane) options() pipeline.Options {
	e := l.e
	var opt pipeline.Options
	if e.set == nil {
		opt = gpu.RunOptions(e.cfg.Exec)
		opt.Window = e.cfg.Queue
	} else {
		opt = gpu.RunOptions(e.cfg.Exec, e.set.Devices()...)
		g := *opt.Backend.(*gpu.Options)
		g.Linger, g.Wait, g.Optional = e.cfg.Delay, true, false
		opt.Backend = e.set.Backend(g)
		opt.Trace = e.stats
	}
	opt.StopOnError = false // one request's failure is its own
	opt.Device = e.device
	opt.Notice = e.cfg.Notice
	return opt
}

// Next implements pipeline.Source: the next request's input, or io.EOF once the lane has
// been idle for Config.Idle or the engine closes with no request waiting. Requests taken
// before are finished by the run after that.
func (l *lane) Next(ctx context.Context) (pipeline.Input, error) {
	idle := time.NewTimer(l.e.cfg.Idle)
	defer idle.Stop()
	for {
		select {
		case r := <-l.queue:
			if in, ok := l.take(r); ok {
				return in, nil
			}
		case <-idle.C:
			if l.retire() {
				return pipeline.Input{}, io.EOF
			}
			idle.Reset(l.e.cfg.Idle)
		case <-l.stop:
			if l.retire() {
				return pipeline.Input{}, io.EOF
			}
			// Requests counted before Close are on their way: wait for one without
			// looking at stop, which stays closed, and look again after it.
			select {
			case r := <-l.queue:
				if in, ok := l.take(r); ok {
					return in, nil
				}
			case <-ctx.Done():
				return pipeline.Input{}, ctx.Err()
			}
		case <-ctx.Done():
			return pipeline.Input{}, ctx.Err()
		}
	}
}

// take registers r as the run's next input, unless its caller has already left. The
// request lets go of its input: the run holds it while it needs it, and no longer.
func (l *lane) take(r *request) (pipeline.Input, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.queued--
	in := r.in
	r.in = pipeline.Input{}
	if err := r.ctx.Err(); err != nil {
		l.deliverLocked(r, outcome{err: err})
		return pipeline.Input{}, false
	}
	if in.Name == "" {
		in.Name = "request"
	}
	l.taken[l.next] = r
	l.next++
	return in, true
}

// retire removes the lane from the engine when no request is queued for it, and reports
// whether it did; a request that comes after that starts a new lane.
func (l *lane) retire() bool {
	l.e.mu.Lock()
	defer l.e.mu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.queued > 0 {
		return false
	}
	if l.e.lanes[l.key] == l {
		delete(l.e.lanes, l.key)
	}
	return true
}

// Write implements pipeline.Sink: it encodes the output in memory, for Result.Encoded, as
// Collect does, and drops the image then: the bytes are the output, and on a GPU an
// image kept past Write is copied out of its slot. On the CPU the result is final once
// written, so it goes back at once rather than in input order (Done): a request does not
// wait for a slower one taken before it. On a GPU the output's encoder (the device's, or
// the chain's) is only known in Done, where the result goes back.
func (l *lane) Write(ctx context.Context, r *pipeline.Result, enc *pipeline.Encoder) error {
	if enc == nil {
		return nil
	}
	var inMemory pipeline.Collector
	err := inMemory.Write(ctx, r, enc)
	r.Image = nil
	if err != nil || l.e.set != nil {
		return err
	}
	res := *r
	res.Status, res.Encoder = pipeline.StatusOK, l.plan.Save.Encoder.Name // as Run's store sets them
	l.deliver(r.Index, res)
	r.Encoded = nil // the run holds r until it is reported in order; the request has the bytes
	return nil
}

// Done implements pipeline.Sink: it hands the result to its request, unless Write did.
func (l *lane) Done(_ context.Context, r *pipeline.Result) error {
	l.deliver(r.Index, *r)
	return nil
}

// deliver hands the result of input index to its request, once.
func (l *lane) deliver(index int, res pipeline.Result) {
	l.mu.Lock()
	defer l.mu.Unlock()
	req := l.taken[index]
	if req == nil {
		return // Write delivered it
	}
	delete(l.taken, index)
	res.Index = 0
	l.deliverLocked(req, outcome{res: res})
}

// deliverLocked counts r's outcome, frees its places in the lane's and the engine's
// shares of the queue, and only then hands the outcome over: a caller that has it finds
// its place free and itself counted in Stats. l.mu must be held.
func (l *lane) deliverLocked(r *request, o outcome) {
	l.e.stats.request(o, time.Since(r.start))
	l.held.Add(-1)
	l.e.held.Add(-1)
	r.out <- o
}

func gomaxprocs() int { return runtime.GOMAXPROCS(0) }
