package gpu

import (
	"context"
	"math/rand"
	"testing"

	"github.com/imgpipe/imgpipe/cudastage/sched/schedtest"
	"github.com/imgpipe/imgpipe/pipeline"
	"github.com/imgpipe/imgpipe/stages/stagestest"
)

// Runs one after another on a Set take their slots' memory from its pools: the second run
// finds the first's buffers there, and gives the CPU's bits; Close frees every buffer.
func TestSetSharesMemoryAcrossRuns(t *testing.T) {
	plan := compileWith(t, pipeline.Builtin, "decode | grayscale | blur sigma=1.5 | histogram")
	rng := rand.New(rand.NewSource(7))
	var inputs []pipeline.Input
	for i := range 12 {
		inputs = append(inputs, pipeline.Input{Name: string(rune('a' + i)), Image: stagestest.ReadImage(rng, 20+i, 9, 3)})
	}
	devs, fakes := fakeGPUs(t, 2, func(int) schedtest.FakeConfig { return schedtest.FakeConfig{} })
	for _, n := range []int{1, 2} {
		set, err := NewSet(devs[:n]...)
		if err != nil {
			t.Fatal(err)
		}
		cpu := pipeline.Collect()
		if _, err := pipeline.Run(context.Background(), plan, pipeline.Inputs(inputs...), cpu, pipeline.Options{Workers: 2}); err != nil {
			t.Fatal(err)
		}
		for run := range 2 {
			dev := pipeline.Collect()
			sum, err := pipeline.Run(context.Background(), plan, pipeline.Inputs(inputs...), dev,
				pipeline.Options{Workers: 2, Backend: set.Backend(Options{Device: devs[1], Streams: 2, Batch: 4, SlotBytes: 64 << 10})})
			if err != nil {
				t.Fatal(err)
			}
			if sum.Batches == 0 || (run == 1) != (sum.PoolHits > 0) || (n > 1) != (len(sum.GPUs) == n) {
				t.Errorf("%d devices, run %d: %d batches, %d pool hits, %d devices' figures", n, run, sum.Batches, sum.PoolHits, len(sum.GPUs))
			}
			for i, c := range cpu.Results {
				if d := dev.Results[i]; d.Status != pipeline.StatusOK || stagestest.Diff(c.Image, d.Image) != "" || *c.Histogram != *d.Histogram {
					t.Errorf("%d devices, run %d, %s: %v %v, not the CPU's bits", n, run, d.Input, d.Status, d.Err)
				}
			}
		}
		if err := set.Close(); err != nil {
			t.Fatal(err)
		}
		for _, f := range fakes[:n] {
			if l := f.Live(); l != (schedtest.FakeLive{}) {
				t.Errorf("%d devices: memory left on %s after Close: %+v", n, f.Name(), l)
			}
		}
	}
	if _, err := NewSet(); err == nil {
		t.Error("NewSet without a device: no error")
	}
}
