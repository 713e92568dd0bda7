package cudastage

import (
	"fmt"
	"slices"

	"github.com/imgpipe/imgpipe/cudastage/sched"
	"github.com/imgpipe/imgpipe/pipeline"
)

// Test helpers: placements for batches, and ops bound as production binds
// them.

// opsOf binds a chain of pixel stages ("grayscale | blur sigma=1.5") into
// device ops exactly as production does (pipeline.ParseSpec, then
// pipeline.DeviceOps, which binds each stage of the registry). It panics on a
// bad spec, so that table literals stay short.
func opsOf(spec string) []sched.Op {
	steps, err := pipeline.ParseSpec(spec)
	if err != nil {
		panic(fmt.Sprintf("opsOf(%q): %v", spec, err))
	}
	ops, err := pipeline.DeviceOps(steps)
	if err != nil {
		panic(fmt.Sprintf("opsOf(%q): %v", spec, err))
	}
	return ops
}

// arrayOpsOf binds a chain of array stages ("scale factor=2 | sum") into
// device ops exactly as production does: compiled after a load stage, each
// step's bound GPU op. It panics on a bad spec.
func arrayOpsOf(spec string) []sched.Op {
	steps, err := pipeline.ParseSpec("load | " + spec)
	if err != nil {
		panic(fmt.Sprintf("arrayOpsOf(%q): %v", spec, err))
	}
	plan, err := pipeline.Compile(steps)
	if err != nil {
		panic(fmt.Sprintf("arrayOpsOf(%q): %v", spec, err))
	}
	ops, err := plan.DeviceOps()
	if err != nil {
		panic(fmt.Sprintf("arrayOpsOf(%q): %v", spec, err))
	}
	return ops
}

// stageSpecs are the specs the launcher tests bind a stage's op from, by
// stage name, where its default parameters do not bind (resize has no
// default size) or do not reach what the tests want (wider blur radii); each
// op's own test file adds its stage's from init.
var stageSpecs = map[string]string{}

// stageSpec is the spec the launcher tests bind the stage called name from:
// its stageSpecs entry, or its name alone (default parameters).
func stageSpec(name string) string {
	if spec, ok := stageSpecs[name]; ok {
		return spec
	}
	return name
}

// opOf is the op of a spec of one pixel stage ("boxblur radius=3").
func opOf(spec string) sched.Op {
	ops := opsOf(spec)
	if len(ops) != 1 {
		panic(fmt.Sprintf("opOf(%q): %d ops, want 1", spec, len(ops)))
	}
	return ops[0]
}

// Pack places images of the given shapes (W, H, C; Off and Stride are
// ignored) one after another in one buffer, rows tightly packed (Stride =
// W·C) and each image's first byte aligned to align bytes, a power of two
// (16 or more keeps the kernels on their vector paths for widths that allow
// it). It returns the placements and the buffer size they need.
func Pack(shapes []BatchImage, align int) ([]BatchImage, uint64, error) {
	if align < 1 || align&(align-1) != 0 {
		return nil, 0, fmt.Errorf("pack: alignment %d is not a power of two", align)
	}
	if len(shapes) > MaxBatchImages {
		return nil, 0, fmt.Errorf("pack: %d images, at most %d", len(shapes), MaxBatchImages)
	}
	out := make([]BatchImage, len(shapes))
	var off uint64
	for i, s := range shapes {
		if err := s.checkShape(); err != nil {
			return nil, 0, fmt.Errorf("pack: image %d: %w", i, err)
		}
		off = alignUp(off, uint64(align))
		out[i] = BatchImage{W: s.W, H: s.H, C: s.C, Off: off, Stride: s.W * s.C}
		off += uint64(s.W * s.H * s.C)
	}
	return out, off, nil
}

// Outputs returns the Dst placements for op over src, packed as Pack does
// (align bytes), and the destination buffer size. For a histogram op they
// are consecutive sched.HistBytes count arrays (Off only; align is ignored),
// for an encoding op files of Op.Encode.Bound bytes (Off only).
// The outputs of one op are the sources of the next, except after a
// histogram, which passes its image through: the next op reads its Src.
func Outputs(op sched.Op, src []BatchImage, align int) ([]BatchImage, uint64, error) {
	if op.Encode != nil { // files of Bound bytes, one after another
		out := make([]BatchImage, len(src))
		var off uint64
		for i, s := range src {
			off = alignUp(off, uint64(align))
			out[i] = BatchImage{Off: off}
			off += uint64(op.Encode.Bound(s.shape()))
		}
		return out, off, nil
	}
	if op.Hist {
		if len(src) > MaxBatchImages {
			return nil, 0, fmt.Errorf("outputs: %d images, at most %d", len(src), MaxBatchImages)
		}
		out := make([]BatchImage, len(src))
		for i := range out {
			out[i] = BatchImage{Off: uint64(i) * sched.HistBytes}
		}
		return out, uint64(len(src)) * sched.HistBytes, nil
	}
	shapes := make([]BatchImage, len(src))
	for i, s := range src {
		out := op.OutShape(s.shape())
		shapes[i] = BatchImage{W: out.W, H: out.H, C: out.C}
	}
	return Pack(shapes, align)
}

// fatbinStages are the stages whose launchers run imgpipe's own kernels
// (passes), sorted, the PNG encoder ("save", encode set) included;
// user-kernel launchers (prepare and run) need a source and a GPU to bind,
// and are tested in op_kernel_gpu_test.go.
func fatbinStages() []string {
	var out []string
	for name, l := range launchers {
		if len(l.passes) > 0 {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}
