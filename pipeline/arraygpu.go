package pipeline

import (
	"fmt"

	"github.com/imgpipe/imgpipe/cudastage/sched"
	"github.com/imgpipe/imgpipe/stages"
	"github.com/imgpipe/imgpipe/stages/npy"
)

// Array chains on a GPU: the array stages become one device segment of array ops
// (sched.Op.Array), which package pipeline/gpu runs over batches of arrays.

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
