package engine_test

import (
	"bytes"
	"context"
	"fmt"
	"math/rand"
	"strconv"
	"sync"
	"testing"

	"github.com/imgpipe/imgpipe/cudastage/cutest"
	"github.com/imgpipe/imgpipe/engine"
	"github.com/imgpipe/imgpipe/pipeline"
	"github.com/imgpipe/imgpipe/stages/stagestest"
)

// TestGPUEngineMatchesCPU sends concurrent single-image requests of several chains to an
// engine on the GPU and checks each output against a CPU engine's bytes, and that the
// requests shared device batches.
func TestGPUEngineMatchesCPU(t *testing.T) {
	ordinal := cutest.Require(t)
	chains := []string{
		"decode | resize width=256 height=256 fit=inside | save format=jpeg quality=75",
		"decode scale=auto | resize width=64 height=64 fit=inside filter=lanczos3 | save format=jpeg quality=75",
		"decode | grayscale | blur sigma=1.5 | transpose | histogram | save format=png",
	}
	rng := rand.New(rand.NewSource(3))
	var inputs []pipeline.Input
	for i := range 48 {
		w, h := 200+rng.Intn(900), 150+rng.Intn(700)
		format := []string{"jpeg", "png"}[i%2]
		inputs = append(inputs, pipeline.Input{Name: fmt.Sprintf("%d.%s", i, format), Data: stagestest.Encode(t, stagestest.Smooth(w, h, int64(i)), format)})
	}
	cpuExec := pipeline.DefaultExecution()
	cpuExec.Device = "cpu"
	gpuExec := pipeline.DefaultExecution()
	gpuExec.Device, gpuExec.GPU = "cuda", pipeline.GPUSet(strconv.Itoa(ordinal))
	cpu := openGPUTest(t, engine.Config{Exec: cpuExec})
	dev := openGPUTest(t, engine.Config{Exec: gpuExec})
	for _, spec := range chains {
		plan, err := pipeline.CompileSpec(spec)
		if err != nil {
			t.Fatal(err)
		}
		want := processAllGPUTest(t, cpu, plan, inputs)
		got := processAllGPUTest(t, dev, plan, inputs)
		for i := range inputs {
			w, g := want[i], got[i]
			if g.Status != pipeline.StatusOK || !bytes.Equal(g.Encoded, w.Encoded) || (g.Histogram == nil) != (w.Histogram == nil) ||
				g.Histogram != nil && *g.Histogram != *w.Histogram {
				t.Errorf("%s, %s: GPU %s %v (decoder %s, %d bytes), CPU %s (%d bytes)", spec, inputs[i].Name, g.Status, g.Err, g.Decoder, len(g.Encoded), w.Status, len(w.Encoded))
			}
		}
	}
	s := dev.Stats()
	shared := uint64(0)
	for i, n := range s.BatchSizes.Counts {
		if i > 0 {
			shared += n
		}
	}
	if shared == 0 {
		t.Errorf("no device batch held more than one request's image: %+v", s.BatchSizes)
	}
	t.Logf("device %s: batches by size %v (bounds %v), device busy %v", s.Device, s.BatchSizes.Counts, s.BatchSizes.Bounds, s.DeviceBusy)
}

func openGPUTest(t *testing.T, cfg engine.Config) *engine.Engine {
	t.Helper()
	e, err := engine.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := e.Close(); err != nil {
			t.Error(err)
		}
	})
	return e
}

// processAllGPUTest sends every input as its own request, all at once, and returns the results in
// input order.
func processAllGPUTest(t *testing.T, e *engine.Engine, plan *pipeline.Plan, inputs []pipeline.Input) []pipeline.Result {
	t.Helper()
	out := make([]pipeline.Result, len(inputs))
	var wg sync.WaitGroup
	for i, in := range inputs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := e.Process(context.Background(), plan, in)
			if err != nil {
				t.Errorf("%s: %v", in.Name, err)
			}
			out[i] = res
		}()
	}
	wg.Wait()
	return out
}
