package gpu

import (
	"bytes"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/imgpipe/imgpipe/pipeline"

	"github.com/imgpipe/imgpipe/cudastage/sched/schedtest"
)

// randomArrays are .npy inputs of odd shapes (0-d, a zero-length axis, lengths either
// side of 256 and 65536, one too large for the test's slots) with NaN, ±Inf, ±0 and
// subnormals among random values, and a file that is not an array.
func randomArrays(t *testing.T, rng *rand.Rand) []pipeline.Input {
	t.Helper()
	shapes := [][]int{{}, {1}, {3, 0}, {255}, {256}, {257}, {7, 11, 13}, {65537}, {2, 70000}, {1, 1, 1, 5}}
	specials := []float32{float32(math.NaN()), f32Inf, -f32Inf, 0, float32(math.Copysign(0, -1)), 1e-45, -3e-39}
	var in []pipeline.Input
	for i, sh := range shapes {
		n := 1
		for _, d := range sh {
			n *= d
		}
		x := make([]float32, n)
		for j := range x {
			x[j] = float32(rng.NormFloat64() * math.Pow(10, float64(rng.IntN(8)-4)))
			if i%3 == 1 && rng.IntN(5000) == 0 {
				x[j] = specials[rng.IntN(len(specials))]
			}
		}
		in = append(in, pipeline.Input{Name: strings.Repeat("a", i+1) + ".npy", Data: npyBytes(t, sh, x)})
	}
	return append(in, pipeline.Input{Name: "bad.npy", Data: []byte("not an array")})
}

// A GPU run of an array chain (on the fake device, which runs each op's reference) gives
// the CPU run's bits: the saved .npy bytes, the reductions in the report, the failures;
// an array without elements or too large for a slot runs on the CPU path.
func TestGPUArrayRunMatchesCPU(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	inputs := randomArrays(t, rng)
	for _, spec := range []string{
		"load | scale factor=1.7 | add value=-0.3 | sum | min | max | save format=npy",
		"load | sum | max",
		"load | add value=1e-3 | save format=npy",
	} {
		t.Run(spec, func(t *testing.T) {
			plan := mustArrayPlan(t, spec)
			gpu := &Options{Device: fakeGPU(t, schedtest.FakeConfig{}), Streams: 2, Batch: 3, SlotBytes: 512 << 10, Linger: time.Millisecond}
			cpu, dev, cpuRep, devRep, sum := runBoth(t, plan, inputs, gpu, 3)
			if sum.CPUFallback != 2 { // {3, 0} and {2, 70000}
				t.Errorf("%d arrays ran on the CPU path, want 2", sum.CPUFallback)
			}
			if sum.Batches == 0 {
				t.Error("no batch ran on the device")
			}
			for i := range inputs {
				c, d := cpu.Results[i], dev.Results[i]
				if c.Status != d.Status || !bytes.Equal(c.Encoded, d.Encoded) || errText(c.Err) != errText(d.Err) {
					t.Errorf("%s: device %s %v (%d bytes), CPU %s %v (%d bytes)", inputs[i].Name, d.Status, d.Err, len(d.Encoded), c.Status, c.Err, len(c.Encoded))
				}
				if len(c.Reductions) != len(d.Reductions) {
					t.Fatalf("%s: reductions %v, CPU %v", inputs[i].Name, d.Reductions, c.Reductions)
				}
				for j := range c.Reductions {
					if c.Reductions[j].Stage != d.Reductions[j].Stage || math.Float32bits(c.Reductions[j].Value) != math.Float32bits(d.Reductions[j].Value) {
						t.Errorf("%s: reduction %v, CPU %v", inputs[i].Name, d.Reductions[j], c.Reductions[j])
					}
				}
			}
			cl, dl := reportLines(t, cpuRep), reportLines(t, devRep)
			if strings.Join(cl[:len(cl)-1], "\n") != strings.Join(dl[:len(dl)-1], "\n") {
				t.Errorf("report lines differ:\nCPU:\n%s\nGPU:\n%s", cpuRep, devRep)
			}
		})
	}
}

// errText is err's message, "" for nil.
func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
