package pipeline

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/imgpipe/imgpipe/stages"
)

// cpuBackend runs the chain on CPU workers: each runs the whole chain on one input at a
// time.
type cpuBackend struct{}

func (cpuBackend) Window(int) int { return 0 }

func (cpuBackend) Start(r *Runner) error {
	var workers sync.WaitGroup
	for i := 0; i < r.opt.Workers; i++ {
		workers.Add(1)
		r.Go(func() error {
			defer workers.Done()
			r.work(fmt.Sprintf("cpu worker %d", i+1))
			return nil
		})
	}
	r.Go(func() error {
		workers.Wait()
		close(r.done)
		return nil
	})
	return nil
}

func (cpuBackend) Finish(*Summary) error { return nil }

// work processes inputs until the source is drained; once the run is cancelled or
// stopped it only passes the remaining ones on as dropped.
func (r *Runner) work(track string) {
	w := &Worker{track: track}
	for it := range r.jobs {
		if r.ctx.Err() != nil || r.after(it.idx) {
			it.dropped = true
		} else {
			r.process(it, w)
		}
		r.Done(it)
	}
}

// process runs the chain on one input on the CPU. A panic in a stage (a decoder bug on a
// hostile file) fails that input instead of the run.
func (r *Runner) process(it *Item, w *Worker) {
	if r.settle(it) {
		return
	}
	if r.plan.Load != nil {
		r.processArray(it, w)
		return
	}
	stage := r.plan.Steps[0].Def.Name
	defer func() {
		if p := recover(); p != nil {
			failWith(&it.res, stage, fmt.Errorf("panic: %v", p))
		}
	}()
	t0 := time.Now()
	img, decoder, owned, release, err := r.decode(it.in, &w.bufs)
	r.span(w.track, stage, it.in.Name, t0)
	it.res.Decoder, it.res.DecodeScale = decoder.Decoder, decoder.Scale
	if err != nil {
		if r.ctx.Err() != nil && errors.Is(err, r.ctx.Err()) {
			it.dropped = true // interrupted while waiting for memory, or in a streamed decode: not done
			return
		}
		failWith(&it.res, stage, err)
		return
	}
	defer release()
	r.cpuChain(it, w, img, owned)
}

// cpuChain runs the pixel stages on a decoded image on the CPU and stores the result.
// owned tells whether img belongs to the run (and may be recycled).
func (r *Runner) cpuChain(it *Item, w *Worker, img *stages.Image, owned bool) {
	sc := &w.bufs
	res := &it.res
	stage := r.plan.Steps[0].Def.Name
	defer func() {
		if p := recover(); p != nil {
			failWith(res, stage, fmt.Errorf("panic: %v", p))
		}
	}()
	res.Width, res.Height = img.W, img.H
	if r.plan.HasHistogram() {
		res.Histogram = new([256]uint64)
	}
	chainStart := time.Now()
	for _, ps := range r.plan.Pixels {
		stage = ps.Def.Name
		t0 := time.Now()
		out, passThrough := ps.Def.Shape(img.Shape(), ps.Params)
		if passThrough {
			ps.Run(nil, img, res.Histogram)
			r.span(w.track, stage, it.in.Name, t0)
			continue
		}
		dst := sc.get(out.W, out.H, out.C)
		ps.Run(dst, img, res.Histogram)
		r.span(w.track, stage, it.in.Name, t0)
		if owned {
			sc.put(img)
		}
		img, owned = dst, true
	}
	since(&r.phases.chain, chainStart)
	res.Image = img
	r.store(it, w.track, nil)
	if res.Image == nil && owned {
		sc.put(img) // the sink is done with it
	}
}

// scratch recycles one worker's pixel buffers between stages and inputs, so a steady run
// does not allocate (and zero) a fresh buffer per stage per image. It holds a few buffers
// at most, so a worker's memory is bounded by its largest images.
type scratch struct {
	free [][]byte
}

// Worker is one worker goroutine's own state (NewWorker).
type Worker struct {
	track string // its trace track
	bufs  scratch
}

const scratchKeep = 3

// get returns a w×h×c image whose pixels are NOT zeroed: every stage writes all of dst.
func (s *scratch) get(w, h, c int) *stages.Image {
	n := w * h * c
	best := -1
	for i, b := range s.free {
		if cap(b) >= n && (best < 0 || cap(b) < cap(s.free[best])) {
			best = i
		}
	}
	var pix []byte
	if best >= 0 {
		pix = s.free[best][:n]
		s.free = append(s.free[:best], s.free[best+1:]...)
	} else {
		pix = make([]byte, n)
	}
	return &stages.Image{W: w, H: h, C: c, Stride: w * c, Pix: pix}
}

// put gives m's buffer back; the smallest buffer is dropped when too many are kept.
func (s *scratch) put(m *stages.Image) {
	s.free = append(s.free, m.Pix[:0])
	if len(s.free) > scratchKeep {
		small := 0
		for i, b := range s.free {
			if cap(b) < cap(s.free[small]) {
				small = i
			}
		}
		s.free = append(s.free[:small], s.free[small+1:]...)
	}
}
