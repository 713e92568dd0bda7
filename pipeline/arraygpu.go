package pipeline

import (
	"errors"
	"fmt"

	"github.com/imgpipe/imgpipe/cudastage/sched"
	"github.com/imgpipe/imgpipe/stages"
	"github.com/imgpipe/imgpipe/stages/npy"
)

// Array chains on a GPU. The array stages become one device segment of array ops
// (sched.Op.Array): a decode worker reads each .npy file and writes its elements straight
// into a page-locked slot (ReserveArray); the executor uploads the batch, runs every op
// over it and brings back the final array and the reductions' values; a save worker
// writes the array and puts the values into the result, as processArray does on the CPU.
// Arrays travel as the little-endian bytes of their elements (sched.ArrayShape). An array
// without elements, or too large for a slot, runs on the CPU path instead.

// bindArrayOp binds an array step with a GPU kernel into the scheduler's op: its name,
// canonical text and launch arguments, and run as the reference a device without the
// kernel (the fake device) runs, as CPU for an elementwise stage and as Reduce for a
// reduction.
func bindArrayOp(s Step, run ArrayFunc) (sched.Op, error) {
	args, err := s.Def.GPU(s.Params)
	if err != nil {
		return sched.Op{}, err
	}
	op := sched.Op{Name: s.Def.Name, Spec: opSpec(s), Array: true, Args: args}
	if s.Def.Reduces {
		op.Reduce = func(src *stages.Image) float32 {
			// Only min and max of an empty array fail, and no device array is empty.
			v, _ := run(&npy.Array{Shape: []int{src.W}, Data: npy.Floats(src.Pix)})
			return v
		}
		return op, nil
	}
	op.CPU = func(dst, src *stages.Image, _ *[256]uint64) {
		a := &npy.Array{Shape: []int{src.W}, Data: npy.Floats(src.Pix)}
		_, _ = run(a) // an elementwise stage never fails
		npy.PutFloats(dst.Pix, a.Data)
	}
	return op, nil
}

// arrayDeviceOps are an array plan's array stages as device ops (see DeviceOps).
func (p *Plan) arrayDeviceOps() ([]sched.Op, error) {
	if len(p.Arrays) == 0 {
		return nil, fmt.Errorf("chain %q has no array stage to run on a device", p.String())
	}
	ops := make([]sched.Op, 0, len(p.Arrays))
	for _, as := range p.Arrays {
		if as.GPU == nil {
			return nil, &PosError{Pos: as.Pos, Err: fmt.Errorf("stage %s has no GPU implementation", as.Def.Name)}
		}
		ops = append(ops, *as.GPU)
	}
	return ops, nil
}

// arrayToDevice reads an input's array and commits its elements to a batch, as toDevice
// does for an image, reporting whether it did; otherwise the input is finished: failed,
// run on the CPU path (no elements, or too large for a slot), or dropped because the
// executor stopped.
func (b *gpuBackend) arrayToDevice(it *item, w *worker) bool {
	r := b.r
	if r.settle(it) {
		return false
	}
	a, release, ok := r.readArray(it, w)
	if !ok {
		return false
	}
	// Once copied, the elements are in the slot, which the executor's own budget bounds.
	defer release()
	if len(a.Data) == 0 {
		b.cpuFallback.Add(1)
		r.cpuArrayChain(it, w, a)
		return false
	}
	rsv, err := b.x.reserve(r.ctx, func(e *sched.Executor) (*sched.Reservation, error) {
		return e.ReserveArray(r.ctx, a.Shape, it)
	})
	switch {
	case errors.Is(err, sched.ErrTooLarge):
		b.cpuFallback.Add(1)
		r.cpuArrayChain(it, w, a)
		return false
	case err != nil:
		it.dropped = true // the executor stopped: the run is ending
		return false
	}
	npy.PutFloats(rsv.Image().Pix, a.Data)
	b.inExec.Store(it.idx, it)
	rsv.Commit()
	return true
}

// saveArrayResult stores one device result of an array chain: the final array, copied out
// of the slot's page-locked memory (released here), and the reductions' values, in chain
// order as on the CPU path.
func (r *runner) saveArrayResult(it *item, sr *sched.Result, track string) {
	res := &it.res
	defer sr.Release()
	if sr.Err != nil {
		failWith(res, stageLoad, sr.Err)
		return
	}
	k := 0
	for _, as := range r.plan.Arrays {
		if as.Def.Reduces {
			res.Reductions = append(res.Reductions, Reduction{Stage: as.Def.Name, Value: sr.Values[k]})
			k++
		}
	}
	r.storeArray(it, track, &npy.Array{Shape: res.Shape, Data: npy.Floats(sr.Image.Pix)})
}
