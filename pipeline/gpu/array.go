package gpu

import (
	"errors"

	"github.com/imgpipe/imgpipe/cudastage/sched"
	"github.com/imgpipe/imgpipe/pipeline"
	"github.com/imgpipe/imgpipe/stages/npy"
)

// Array chains on a GPU. The array stages are one device segment of array ops
// (sched.Op.Array, Plan.DeviceOps): a decode worker reads each .npy file and writes its
// elements straight into a page-locked slot (ReserveArray); the executor uploads the
// batch, runs every op over it and brings back the final array and the reductions'
// values; a save worker writes the array and puts the values into the result, as the CPU
// path does. Arrays travel as the little-endian bytes of their elements
// (sched.ArrayShape). An array without elements, or too large for a slot, runs on the CPU
// path instead.

// arrayToDevice reads an input's array and commits its elements to a batch, as toDevice
// does for an image, reporting whether it did; otherwise the input is finished: failed,
// run on the CPU path (no elements, or too large for a slot), or dropped because the
// executor stopped.
func (b *gpuBackend) arrayToDevice(it *pipeline.Item, w *worker) bool {
	r := b.r
	if r.Settle(it) {
		return false
	}
	a, release, ok := r.ReadArray(it, w.Worker)
	if !ok {
		return false
	}
	// Once copied, the elements are in the slot, which the executor's own budget bounds.
	defer release()
	if len(a.Data) == 0 {
		b.cpuFallback.Add(1)
		r.CPUArrayChain(it, w.Worker, a)
		return false
	}
	rsv, err := b.x.reserve(r.Context(), func(e *sched.Executor) (*sched.Reservation, error) {
		return e.ReserveArray(r.Context(), a.Shape, it)
	})
	switch {
	case errors.Is(err, sched.ErrTooLarge):
		b.cpuFallback.Add(1)
		r.CPUArrayChain(it, w.Worker, a)
		return false
	case err != nil:
		it.Drop() // the executor stopped: the run is ending
		return false
	}
	npy.PutFloats(rsv.Image().Pix, a.Data)
	b.inExec.Store(it.Index(), it)
	rsv.Commit()
	return true
}

// saveArrayResult stores one device result of an array chain: the final array, copied out
// of the slot's page-locked memory (released here), and the reductions' values, in chain
// order as on the CPU path.
func (b *gpuBackend) saveArrayResult(it *pipeline.Item, sr *sched.Result, track string) {
	res, plan := it.Result(), b.r.Plan()
	defer sr.Release()
	if sr.Err != nil {
		it.Fail(plan.Steps[0].Def.Name, sr.Err) // the load stage's
		return
	}
	k := 0
	for _, as := range plan.Arrays {
		if as.Def.Reduces {
			res.Reductions = append(res.Reductions, pipeline.Reduction{Stage: as.Def.Name, Value: sr.Values[k]})
			k++
		}
	}
	b.r.StoreArray(it, track, &npy.Array{Shape: res.Shape, Data: npy.Floats(sr.Image.Pix)})
}
