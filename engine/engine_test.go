package engine_test

import (
	"bytes"
	"context"
	"image/png"
	"sync"
	"testing"

	"github.com/imgpipe/imgpipe/engine"
	"github.com/imgpipe/imgpipe/pipeline"
	"github.com/imgpipe/imgpipe/stages/stagestest"
)

func TestProcessConcurrentCPU(t *testing.T) {
	exec := pipeline.DefaultExecution()
	exec.Device = "cpu"
	e, err := engine.Open(engine.Config{Exec: exec})
	if err != nil {
		t.Fatal(err)
	}
	plan, err := pipeline.CompileSpec("decode | grayscale | save format=png")
	if err != nil {
		t.Fatal(err)
	}
	data := stagestest.Encode(t, stagestest.Smooth(64, 48, 1), "png")
	var wg sync.WaitGroup
	for i := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := e.Process(context.Background(), plan, pipeline.Input{Name: "a.png", Data: data})
			if err != nil || res.Status != pipeline.StatusOK {
				t.Errorf("request %d: %v %v %v", i, err, res.Status, res.Err)
				return
			}
			m, err := png.Decode(bytes.NewReader(res.Encoded))
			if err != nil || m.Bounds().Dx() != 64 {
				t.Errorf("request %d: output %v", i, err)
			}
		}()
	}
	wg.Wait()
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if s := e.Stats(); s.OK != 32 || s.Queued != 0 || s.Chains != 0 {
		t.Fatalf("stats %+v", s)
	}
}
