package gpu

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/imgpipe/imgpipe/cudastage/sched"
	"github.com/imgpipe/imgpipe/pipeline"
	"github.com/imgpipe/imgpipe/stages"
)

// gpuBackend runs the pixel stages on device executors: decode workers decode each input
// straight into a page-locked slot, save workers store the results.
type gpuBackend struct {
	run *gpuRun
	r   *pipeline.Runner
	// up is closed once the executors started (x and results set), or did not: the run
	// failed, or no device opened (noGPU) under Options.Optional. See start.go.
	up      chan struct{}
	x       *executors
	results <-chan *sched.Result // every executor's
	noGPU   error                // why no device opened, under Options.Optional
	// deferred: the devices start only once the run's pace says they are worth it
	// (deferred.go); started is closed once they were started, and notStarted is set when
	// the run ended first.
	deferred   bool
	started    chan struct{}
	pace       pace
	notStarted bool

	inExec      sync.Map     // idx → *pipeline.Item: committed to the executor, result not yet taken
	cpuFallback atomic.Int64 // images that ran on the CPU path instead
	cpuStart    atomic.Int64 // inputs that ran wholly on the CPU while the devices opened
	// aside holds the inputs set aside for the devices while they open (setAside), which
	// only a run whose sink keeps no image does (writesOnly); setAsideN counts them.
	aside      asideList
	writesOnly bool
	setAsideN  atomic.Int64

	jpegMu     sync.Mutex
	jpegNotice bool  // a save worker's device JPEG encoder failed to start; said once
	jpegErr    error // errors closing the save workers' device JPEG encoders
}

// worker is a decode worker's own state: the run's, and the buffer of a progressive JPEG
// rewritten for the device (routeFile).
type worker struct {
	*pipeline.Worker
	seq []byte
}

// Window implements pipeline.BoundBackend: the number of inputs a GPU run keeps in flight
// is enough to fill every slot of every device, plus what the decode and save workers
// hold, so that the reorder buffer never starves a device.
func (b *gpuBackend) Window(workers int) int {
	return len(b.run.devs)*b.run.cfg.Slots*b.run.cfg.Batch + 2*workers
}

// toDevice decodes an input straight into a page-locked slot and commits it to its batch.
// It reports whether it did; otherwise the input is finished (failed, skipped, run on the
// CPU path) or, when the executor refused it because the run is ending, dropped. After it
// returns true the item belongs to the save worker that gets its result.
func (b *gpuBackend) toDevice(it *pipeline.Item, w *worker) (committed bool) {
	r := b.r
	if r.Plan().Load != nil {
		return b.arrayToDevice(it, w)
	}
	if r.Settle(it) {
		return false
	}
	res, in := it.Result(), it.Input()
	stage := r.Plan().Steps[0].Def.Name
	var file *pipeline.Loaded // read by fileToDevice for the CPU to decode
	if b.run.files != nil && in.Image == nil {
		var done, committed bool
		if file, done, committed = b.fileToDevice(it, w); done {
			return committed
		}
	}
	var (
		rsv     *sched.Reservation
		onCPU   bool
		refused error // Reserve failed for another reason than size: the executor stopped
	)
	defer func() {
		if p := recover(); p != nil {
			if rsv != nil {
				rsv.Abort() // the rest of the batch goes on without it
			}
			it.Fail(stage, fmt.Errorf("panic: %v", p))
			committed = false
		}
	}()
	alloc := func(width, height, c int) (*stages.Image, error) {
		if width <= sched.MaxSide && height <= sched.MaxSide {
			rs, err := b.x.reserve(r.Context(), func(e *sched.Executor) (*sched.Reservation, error) {
				return e.Reserve(r.Context(), width, height, c, it)
			})
			if err == nil {
				rsv = rs
				return rs.Image(), nil
			}
			if !errors.Is(err, sched.ErrTooLarge) {
				refused = err
				return nil, err
			}
		}
		onCPU = true
		return w.Image(width, height, c), nil
	}
	t0 := time.Now()
	var (
		img     *stages.Image
		decoder pipeline.Decoded
		release func()
		err     error
	)
	if file != nil {
		img, decoder, release, err = r.DecodeLoaded(*file, alloc)
	} else {
		img, decoder, release, err = r.DecodeInto(in, alloc)
	}
	r.Span(w.Track(), stage, in.Name, t0)
	res.Decoder, res.DecodeScale = decoder.Decoder, decoder.Scale
	if err == nil && !onCPU {
		release() // the pixels are in the batch slot, which the executor's own budget bounds
	} else if err == nil {
		defer release() // held through the CPU chain below
	}
	switch {
	case refused != nil:
		it.Drop()
		return false
	case err != nil:
		if rsv != nil {
			rsv.Abort()
		}
		if ctx := r.Context(); ctx.Err() != nil && errors.Is(err, ctx.Err()) {
			it.Drop() // the run ended while it waited for memory: never started
			return false
		}
		it.Fail(stage, err)
		return false
	case onCPU:
		b.cpuFallback.Add(1)
		r.CPUChain(it, w.Worker, img)
		return false
	case img != rsv.Image():
		rsv.Abort()
		it.Fail(stage, errors.New("decoder returned an image it did not allocate"))
		return false
	}
	b.inExec.Store(it.Index(), it)
	committed = true
	rsv.Commit()
	return true
}

// saveWorker stores the executors' results until they finished or stopped, releasing each
// result's slot memory once stored. jpeg is the device JPEG encoder it uses, if any.
func (b *gpuBackend) saveWorker(track string, jpeg sched.JPEGEncoder) {
	r := b.r
	jw := &workerJPEG{b: b, jpeg: jpeg}
	defer jw.close()
	for sr := range b.results {
		it := sr.Tag.(*pipeline.Item)
		b.inExec.Delete(it.Index())
		if r.Ended(it) {
			sr.Release()
			it.Drop()
		} else {
			b.saveResult(it, sr, track, jw.encoder(sr.Image))
		}
		r.Done(it)
	}
}

// saveResult stores one device result. The image lives in the slot's page-locked memory,
// which is released here: a sink that keeps the image (Collect, ToChan without a save
// stage) gets a copy in Go memory. enc, when not nil, is the save worker's device JPEG
// encoder (deviceJPEG).
func (b *gpuBackend) saveResult(it *pipeline.Item, sr *sched.Result, track string, enc *pipeline.Encoder) {
	r, plan := b.r, b.r.Plan()
	if plan.Load != nil {
		b.saveArrayResult(it, sr, track)
		return
	}
	res := it.Result()
	defer sr.Release()
	defer func() {
		if p := recover(); p != nil {
			stage := "sink"
			if plan.Save != nil {
				stage = plan.Save.Def.Name
			}
			it.Fail(stage, fmt.Errorf("panic: %v", p))
			res.Output = ""
		}
		if res.Image != nil {
			res.Image = cloneImage(res.Image)
		}
	}()
	if sr.Decoder != "" {
		res.Decoder = sr.Decoder
	}
	if sr.Err != nil {
		stage := plan.Steps[0].Def.Name // the device could not decode the file
		if errors.Is(sr.Err, sched.ErrEncoderBound) && plan.Save != nil {
			stage = plan.Save.Def.Name
		}
		it.Fail(stage, sr.Err)
		return
	}
	res.Width, res.Height = sr.In.W, sr.In.H
	res.Histogram = sr.Hist
	res.Image = sr.Image
	if sr.Encoded != nil {
		enc = encodedBy(plan.Save.Encoder, sr.Encoded)
	}
	r.Store(it, track, enc)
}

// cloneImage copies m into Go memory, tightly packed.
func cloneImage(m *stages.Image) *stages.Image {
	c := stages.NewImage(m.W, m.H, m.C)
	for y := 0; y < m.H; y++ {
		copy(c.Row(y), m.Row(y))
	}
	return c
}
