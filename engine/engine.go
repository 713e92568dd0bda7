// Package engine keeps imgpipe open for many runs and requests: an Engine opens its devices
// once (on a GPU: the context, nvJPEG handles, kernels and page-locked pools), and then
// processes single images (Process), as a web service's requests are, and whole folder runs
// (Run), many at once, until Close. Requests for the same chain share one resident run, so
// that concurrent requests fill device batches together, as the images of one folder do.
package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/imgpipe/imgpipe/cudastage/sched"
	"github.com/imgpipe/imgpipe/pipeline"
	"github.com/imgpipe/imgpipe/pipeline/folderrun"
	"github.com/imgpipe/imgpipe/pipeline/gpu"
)

// DefaultDelay is how long a request's image waits at most for others to share its device
// batch (Config.Delay): a few milliseconds, small against a request's round trip.
const DefaultDelay = 4 * time.Millisecond

// DefaultIdle is how long a chain's resident run stays open without requests (Config.Idle).
const DefaultIdle = time.Minute

// DefaultChains is how many chains may have a resident run at once (Config.Chains).
const DefaultChains = 8

// ErrBusy is returned by Process when the queue is full (Config.Queue), the request's
// chain holds its share of it, or a new chain would exceed Config.Chains while every
// resident one holds requests: the caller should try again later.
var ErrBusy = errors.New("engine: busy")

// ErrClosed is returned by Process and Run once Close has begun.
var ErrClosed = errors.New("engine: closed")

// Config says how an Engine opens its devices and admits work.
type Config struct {
	// Exec are the execution settings the devices are opened and the runs made with:
	// device (cpu, cuda or auto), gpu, workers, streams, batch, pinned_mb, max_memory_mb.
	// A folder run's own device settings give way to these (Run).
	Exec pipeline.Execution
	// GPUs says how GPUs are found and opened; the zero value uses the CUDA driver.
	GPUs folderrun.GPUs
	// Delay bounds how long a partly filled device batch waits for more requests' images;
	// 0 means DefaultDelay.
	Delay time.Duration
	// Queue bounds the requests admitted and not yet done, over every chain; past it
	// Process returns ErrBusy. 0 means 64 per worker. So that a chain flooding the engine
	// cannot starve the others, it is shared: a chain that holds no request is admitted
	// while the queue has room, and one of k chains that hold some is refused past
	// (Queue - kept)/k requests (at least 1), where kept, the places kept for chains that
	// hold none, is Queue/Chains while fewer than Chains chains are resident, else 0.
	Queue int
	// Chains bounds the chains with a resident run; 0 means DefaultChains. At the bound, a
	// new chain's request is admitted when a resident chain holds no request, whose run
	// then ends; otherwise it is refused with ErrBusy.
	Chains int
	// Idle is how long a chain's resident run stays open without requests; 0 means
	// DefaultIdle.
	Idle time.Duration
	// Notice, if set, receives the engine's one-line notices (a GPU that could not be
	// opened under auto, a resident run that failed).
	Notice func(msg string)
}

// Engine runs chains on devices it opened once. It is safe for concurrent use.
type Engine struct {
	cfg    Config
	devs   *folderrun.Devices
	set    *gpu.Set // nil on the CPU
	stats  *meter
	device string

	mu      sync.Mutex
	closed  bool
	lanes   map[string]*lane
	work    sync.WaitGroup // Process and Run calls in progress
	lanesWG sync.WaitGroup // resident runs
	// held is the requests admitted and not yet done. It grows only under mu, where
	// admission checks it, and shrinks wherever a request is done, so that a check made
	// under mu can only be too strict.
	held atomic.Int64

	closeOnce sync.Once
	closeErr  error
}

// Open opens the devices cfg.Exec names and returns an Engine ready for work. Under device
// auto, no usable GPU leaves the engine on the CPU, with a notice.
func Open(cfg Config) (*Engine, error) {
	if cfg.Exec.Device == "" {
		cfg.Exec = pipeline.DefaultExecution()
	}
	if cfg.Delay < 0 || cfg.Queue < 0 || cfg.Chains < 0 || cfg.Idle < 0 {
		return nil, fmt.Errorf("engine: negative setting (delay %v, queue %d, chains %d, idle %v)", cfg.Delay, cfg.Queue, cfg.Chains, cfg.Idle)
	}
	cfg.Delay = orDefault(cfg.Delay, DefaultDelay)
	cfg.Idle = orDefault(cfg.Idle, DefaultIdle)
	cfg.Chains = orDefault(cfg.Chains, DefaultChains)
	cfg.Queue = orDefault(cfg.Queue, 64*max(1, cfg.Exec.RunOptions().Workers, gomaxprocs()))
	cfg.GPUs.Wait = true // a resident engine pays the GPU's start once, before its first request
	devs, err := folderrun.OpenDevices(cfg.Exec.Device, cfg.Exec.GPU, cfg.GPUs, cfg.Notice)
	if err != nil {
		return nil, err
	}
	e := &Engine{cfg: cfg, devs: devs, lanes: map[string]*lane{}, device: "cpu"}
	if len(devs.GPUs) > 0 {
		if e.set, err = gpu.NewSet(devs.GPUs...); err != nil {
			return nil, errors.Join(&folderrun.RunError{Err: err}, devs.Close())
		}
		e.device = deviceName(devs.GPUs)
	}
	e.stats = newMeter(e.set)
	return e, nil
}

// Device names where the engine's pixel stages run: "cpu", or its GPUs' names.
func (e *Engine) Device() string { return e.device }

// Process runs plan on one input and returns its result, with the encoded output in
// Result.Encoded (and no Image: the bytes are the output) when the chain saves. The
// input's own failure (a corrupt file, an image over the pixel limit) is the result's
// Status and Err, not an error. The error is the engine's: ErrBusy, ErrClosed, ctx's when
// it ended first (the result is then dropped when it comes; other requests are not
// disturbed), or the failure of the resident run the request was in or waiting for (a
// device fault; after a sticky one every later request fails so too, and Stats.Faults
// counts them). A plan whose chain reads arrays (load) or writes nowhere but the report
// works as well. The engine keeps neither the input nor the result once the request is
// done.
func (e *Engine) Process(ctx context.Context, plan *pipeline.Plan, in pipeline.Input) (pipeline.Result, error) {
	if plan == nil {
		return pipeline.Result{}, errors.New("engine: nil plan")
	}
	if err := ctx.Err(); err != nil {
		return pipeline.Result{}, err // a caller that left takes no place in the queue
	}
	l, err := e.admit(plan)
	if err != nil {
		return pipeline.Result{}, err
	}
	defer e.work.Done()
	req := &request{ctx: ctx, in: in, out: make(chan outcome, 1), start: time.Now()}
	l.queue <- req // never blocks: a lane's queue holds as many as the engine admits
	select {
	case o := <-req.out:
		return o.res, o.err
	case <-ctx.Done():
		return pipeline.Result{}, ctx.Err()
	}
}

// Run runs a folder or bucket job on the engine's devices, with every guarantee of
// folderrun.Run (lock, journal, resume); it may run while others and requests do. The
// request's device settings give way to the engine's: its runs use the devices and pools
// the engine opened, with the request's streams, batch and page-locked budget.
func (e *Engine) Run(ctx context.Context, req folderrun.Request) (pipeline.Summary, error) {
	if err := e.begin(); err != nil {
		return pipeline.Summary{}, err
	}
	defer e.work.Done()
	e.stats.runs.Add(1)
	defer e.stats.runs.Add(-1)
	req.Exec.Device, req.Exec.GPU, req.Devices = "cpu", "", nil
	if e.set != nil {
		req.Exec.Device, req.Devices = "cuda", e.set.Devices()
	}
	own := req.Options
	req.Options = func(o *pipeline.Options) {
		if g, ok := o.Backend.(*gpu.Options); ok && e.set != nil {
			o.Backend = e.set.Backend(*g)
		}
		if own != nil {
			own(o)
		}
	}
	return folderrun.Run(ctx, req)
}

// Close stops admitting work, waits for the requests and runs in progress, ends the
// resident runs and closes the devices. Later calls wait for the first to end and return
// nil.
func (e *Engine) Close() error {
	first := false
	e.closeOnce.Do(func() { first, e.closeErr = true, e.close() })
	if !first {
		return nil
	}
	return e.closeErr
}

// close is Close's work, done once. The lanes are told to stop before the requests are
// waited for: a lane's last requests may sit in a partly filled device batch that goes
// only when the lane ends its input (or after Config.Delay). A stopped lane still takes
// the requests admitted before, since none can be admitted once closed is set.
func (e *Engine) close() error {
	e.mu.Lock()
	e.closed = true
	for _, l := range e.lanes {
		l.halt()
	}
	e.mu.Unlock()
	e.work.Wait()
	e.lanesWG.Wait()
	var errs []error
	if e.set != nil {
		e.mu.Lock()
		errs = append(errs, e.set.Close())
		e.mu.Unlock()
	}
	errs = append(errs, e.devs.Close())
	return errors.Join(errs...)
}

// begin counts a call in progress, unless the engine is closing.
func (e *Engine) begin() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return ErrClosed
	}
	e.work.Add(1)
	return nil
}

// deviceName names the GPUs as a run's summary does.
func deviceName(devs []sched.Device) string {
	name := devs[0].Name()
	for _, d := range devs[1:] {
		name += "," + d.Name()
	}
	return name
}

func orDefault[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}
