package gpu

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/imgpipe/imgpipe/pipeline"
	"github.com/imgpipe/imgpipe/stages/stagestest"

	"github.com/imgpipe/imgpipe/cudastage/sched/schedtest"
	"github.com/imgpipe/imgpipe/stages"
)

// A device fault with several batches in flight: the run ends with the device's error,
// and every input is either reported ok (its output whole), reported failed by a fault of
// its own (a corrupt PNG the CPU decodes, a JPEG the device's decoder refuses), or not
// reported at all (in flight when the executor stopped: dropped, so a resume redoes it).
// A good input is never failed, whichever batch it was in.
func TestGPURunFaultFailsOnlyOwnErrors(t *testing.T) {
	for _, c := range []struct {
		name  string
		fault string // the device call that breaks the device
		nth   int32  // at its nth run
	}{
		{"kernel of the 2nd batch", "Run blur", 2},
		{"kernel of a later batch", "Run blur", 7},
		{"device decode", "Decode", 3},
		{"download", "DtoH", 4},
	} {
		t.Run(c.name, func(t *testing.T) {
			base := runtime.NumGoroutine()
			plan, err := pipeline.Compile(mustSteps(t, "decode backend=nvjpeg | grayscale | blur sigma=1 | save"))
			if err != nil {
				t.Fatal(err)
			}
			rng := rand.New(rand.NewSource(21))
			good := stagestest.Encode(t, stagestest.ReadImage(rng, 32, 24, 3), "png")
			goodJPEG := stagestest.Encode(t, stagestest.ReadImage(rng, 32, 24, 3), "jpeg")
			refused := stagestest.Encode(t, stagestest.ReadImage(rng, 24, 16, 3), "jpeg") // the device decoder refuses 24-wide files
			bad := map[string]bool{}
			var inputs []pipeline.Input
			for i := 0; i < 120; i++ {
				name := fmt.Sprintf("%03d", i)
				switch i % 10 {
				case 3:
					inputs = append(inputs, pipeline.Input{Name: name + ".png", Data: good[:50]})
					bad[name+".png"] = true
				case 6:
					inputs = append(inputs, pipeline.Input{Name: name + ".jpg", Data: refused})
					bad[name+".jpg"] = true
				case 1, 5, 8:
					inputs = append(inputs, pipeline.Input{Name: name + ".jpg", Data: goodJPEG})
				default:
					inputs = append(inputs, pipeline.Input{Name: name + ".png", Data: good})
				}
			}
			var n atomic.Int32
			dev := fakeGPU(t, schedtest.FakeConfig{KernelLatency: 100 * time.Microsecond,
				DecodeFail: func(data []byte) error {
					if h, err := stages.DecodeHeader(data, stages.DecodeOptions{}); err == nil && h.W == 24 {
						return errors.New("refused (injected)")
					}
					return nil
				},
				Fault: func(call string) error {
					if call == c.fault && n.Add(1) == c.nth {
						return errors.New("illegal address (injected)")
					}
					return nil
				}})
			src := &takenCounter{Source: pipeline.Inputs(inputs...)}
			out := t.TempDir()
			var report bytes.Buffer
			sum, err := pipeline.Run(context.Background(), plan, src, pipeline.ToFolder(out), pipeline.Options{Workers: 3, Report: &report,
				Backend: &Options{Device: dev, Streams: 2, Batch: 4, Slots: 4, SlotBytes: 64 << 10}})
			if err == nil || !strings.Contains(err.Error(), "device error: fake: batch") || !strings.Contains(err.Error(), "illegal address (injected)") {
				t.Fatalf("err %v", err)
			}
			lines := reportLines(t, report.String())
			reported := 0
			failed := 0
			for _, l := range lines[:len(lines)-1] {
				var rl pipeline.ReportLine
				if err := json.Unmarshal([]byte(l), &rl); err != nil {
					t.Fatal(err)
				}
				reported++
				switch {
				case rl.Status == pipeline.StatusFailed && !bad[rl.Input]:
					t.Errorf("%s failed, blamed for the device's fault: %s", rl.Input, rl.Error)
				case rl.Status == pipeline.StatusFailed:
					failed++
				case rl.Status != pipeline.StatusOK || bad[rl.Input]:
					t.Errorf("%s: %s", rl.Input, rl.Status)
				}
			}
			if sum.Interrupted || sum.Failed != failed || sum.OK+sum.Failed != reported || reported >= len(inputs) {
				t.Errorf("summary %+v: %d reported, %d failed by themselves, of %d", sum, reported, failed, len(inputs))
			}
			// The faulting batch holds at least one input, which must not be reported.
			if src.taken-reported < 1 {
				t.Errorf("%d inputs taken, %d reported: nothing in flight was dropped", src.taken, reported)
			}
			t.Logf("%d inputs taken, %d reported, %d dropped", src.taken, reported, src.taken-reported)
			checkOutputsMatchReport(t, out, report.String(), sum.OK)
			checkNoLeaks(t, base)
		})
	}
}

// takenCounter counts the inputs a run took (Run calls Next from one goroutine).
type takenCounter struct {
	pipeline.Source
	taken int
}

func (s *takenCounter) Next(ctx context.Context) (pipeline.Input, error) {
	in, err := s.Source.Next(ctx)
	if err == nil {
		s.taken++
	}
	return in, err
}
