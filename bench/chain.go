package bench

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"

	"github.com/imgpipe/imgpipe/cudastage/sched"
	"github.com/imgpipe/imgpipe/pipeline"
	"github.com/imgpipe/imgpipe/stages"
)

// DefaultSigma is the blur sigma of the default chain.
const DefaultSigma = 1.5

// DefaultChain is the project's target chain with blur sigma: the one the peers in
// bench/peers run.
func DefaultChain(sigma float64) string {
	return "grayscale | blur sigma=" + strconv.FormatFloat(sigma, 'g', -1, 64) + " | transpose | histogram"
}

// Chain is a chain of pixel stages that all run on a GPU: as a device segment, and as its
// CPU implementation that results are checked against.
type Chain struct {
	Spec  string     // canonical spec, e.g. "grayscale | blur sigma=1.5 | transpose | histogram"
	Label string     // the peers' compact form, e.g. "grayscale|blur1.5|transpose|histogram"
	Ops   []sched.Op // the device segment

	plan *pipeline.Plan // "decode | Spec": its Pixels are the CPU implementation
}

// ParseChain parses a spec of pixel stages that all run on a GPU. Errors keep the spec's
// column positions.
func ParseChain(spec string) (*Chain, error) {
	steps, err := pipeline.ParseSpec(spec)
	if err != nil {
		return nil, err
	}
	ops, err := pipeline.DeviceOps(steps)
	if err != nil {
		return nil, err
	}
	dec, err := pipeline.ParseSpec("decode")
	if err != nil {
		return nil, err
	}
	plan, err := pipeline.Compile(append(dec, steps...))
	if err != nil {
		return nil, err
	}
	return &Chain{Spec: pipeline.FormatSpec(steps), Label: label(ops), Ops: ops, plan: plan}, nil
}

// label writes ops in the peers' compact form (bench/peers/common.py CHAIN): each op's
// name followed by its parameter values, joined by '|': "grayscale|blur1.5|transpose|histogram".
func label(ops []sched.Op) string {
	parts := make([]string, len(ops))
	for i, op := range ops {
		f := strings.Fields(op.String())
		for _, kv := range f[1:] {
			_, v, _ := strings.Cut(kv, "=")
			f[0] += v
		}
		parts[i] = f[0]
	}
	return strings.Join(parts, "|")
}

// cpuChain runs a Chain on the CPU with buffers kept between images (one per worker).
type cpuChain struct {
	steps []pipeline.PixelStep
	hasH  bool
	bufs  []*stages.Image
	hist  [256]uint64
}

func (c *Chain) newCPU() *cpuChain {
	return &cpuChain{steps: c.plan.Pixels, hasH: c.plan.HasHistogram(), bufs: make([]*stages.Image, len(c.plan.Pixels))}
}

// run applies the chain to src (left untouched) and returns the output image and the
// histogram (nil when the chain has none); both are valid until the next run.
func (w *cpuChain) run(src *stages.Image) (*stages.Image, *[256]uint64) {
	var hist *[256]uint64
	if w.hasH {
		clear(w.hist[:])
		hist = &w.hist
	}
	img := src
	for i, ps := range w.steps {
		out, passThrough := ps.Def.Shape(img.Shape(), ps.Params)
		if passThrough {
			ps.Run(nil, img, hist)
			continue
		}
		b := w.bufs[i]
		if b == nil || b.W != out.W || b.H != out.H || b.C != out.C {
			b = stages.NewImage(out.W, out.H, out.C)
			w.bufs[i] = b
		}
		ps.Run(b, img, hist)
		img = b
	}
	return img, hist
}

// sameImage reports whether two images hold the same pixels, describing the first difference.
func sameImage(got, want *stages.Image) error {
	if got.W != want.W || got.H != want.H || got.C != want.C {
		return fmt.Errorf("shape %dx%dx%d, want %dx%dx%d", got.W, got.H, got.C, want.W, want.H, want.C)
	}
	n := want.W * want.C
	for y := range want.H {
		g, w := got.Row(y), want.Row(y)
		if !bytes.Equal(g, w) {
			for x := range n {
				if g[x] != w[x] {
					return fmt.Errorf("pixel (%d, %d) channel %d is %d, want %d", x/want.C, y, x%want.C, g[x], w[x])
				}
			}
		}
	}
	return nil
}
