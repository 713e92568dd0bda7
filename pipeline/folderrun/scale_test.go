package folderrun_test

import (
	"bytes"
	"context"
	"fmt"
	"image"
	"image/png"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/imgpipe/imgpipe/pipeline"
	"github.com/imgpipe/imgpipe/pipeline/folderrun"
)

// A folder of 100,000 one-pixel images runs in bounded memory, and a second run resumes:
// every input skipped, none read again. (-short and -race skip it.)
func TestHundredThousandFiles(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("makes and runs 100,000 files: half a minute on two cores, minutes under -race")
	}
	const n = 100_000
	root := t.TempDir()
	in := filepath.Join(root, "in")
	var px bytes.Buffer
	if err := png.Encode(&px, image.NewGray(image.Rect(0, 0, 1, 1))); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		p := filepath.Join(in, fmt.Sprintf("d%03d", i/1000), fmt.Sprintf("%05d.png", i))
		if i%1000 == 0 {
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(p, px.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	plan, err := pipeline.CompileSpec("decode | histogram")
	if err != nil {
		t.Fatal(err)
	}
	report := filepath.Join(root, "r.jsonl")
	for _, resume := range []bool{false, true} {
		ex := pipeline.DefaultExecution()
		ex.Device, ex.Resume = "cpu", resume
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		sum, err := folderrun.Run(context.Background(), folderrun.Request{Plan: plan, Input: in, Report: report, Exec: ex})
		runtime.ReadMemStats(&after)
		if err != nil {
			t.Fatal(err)
		}
		if want := (pipeline.Summary{OK: n}); resume {
			want = pipeline.Summary{Skipped: n}
			if sum.Skipped != want.Skipped || sum.OK != 0 {
				t.Errorf("resumed: %d ok, %d skipped", sum.OK, sum.Skipped)
			}
		} else if sum.OK != n {
			t.Errorf("%d ok, %d failed", sum.OK, sum.Failed)
		}
		if heap := after.HeapInuse; heap > 512<<20 {
			t.Errorf("resume %v: %d MB of heap in use at the end", resume, heap>>20)
		}
	}
}
