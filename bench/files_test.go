package bench

import (
	"bytes"
	"context"
	"image"
	"image/color"
	"image/png"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/imgpipe/imgpipe/pipeline"
	"github.com/imgpipe/imgpipe/pipeline/folderrun"
)

// photoPNG writes a w×h PNG of random-ish RGB pixels to path.
func photoPNG(t *testing.T, path string, w, h int, seed uint64) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 1))
	m := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			m.Set(x, y, color.RGBA{uint8(rng.Uint32()), uint8(x * 255 / w), uint8(y * 255 / h), 255})
		}
	}
	var b bytes.Buffer
	if err := png.Encode(&b, m); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestCheckFolderOutputsCatchesDifferences(t *testing.T) {
	in, out := t.TempDir(), t.TempDir()
	photoPNG(t, filepath.Join(in, "a.png"), 20, 10, 1)
	c, err := ParseChain(DefaultChain(1.5))
	if err != nil {
		t.Fatal(err)
	}
	// The outputs of the folder run: decode | chain | save format=png on the CPU.
	fb, err := NewFiles(FilesConfig{Dir: in, Out: out}, c)
	if err != nil {
		t.Fatal(err)
	}
	report := filepath.Join(out, folderrun.ReportName)
	run := &folderRun{plan: fb.plan, in: in, out: out, report: report, workers: 1}
	if sum, _, err := run.once(context.Background()); err != nil || sum.OK != 1 {
		t.Fatalf("run: %+v, %v", sum, err)
	}
	plan := c.plan
	if n, err := checkFolderOutputs(plan, c, in, out, report); err != nil || n != 1 {
		t.Fatalf("untouched outputs: %d, %v", n, err)
	}
	// Another picture under the output's name: the check must notice.
	photoPNG(t, filepath.Join(out, "a.png"), 10, 20, 7)
	if _, err := checkFolderOutputs(plan, c, in, out, report); err == nil || !strings.Contains(err.Error(), "differs") {
		t.Errorf("a wrong output passed the check: %v", err)
	}
}

func TestPerImageMS(t *testing.T) {
	tests := []struct {
		sum  pipeline.Summary
		want pipeline.PhaseSeconds
	}{
		{pipeline.Summary{OK: 3, Failed: 1, Phases: pipeline.PhaseSeconds{Read: 0.004, Decode: 0.4, Chain: 0.2, Encode: 0.08, Write: 0.0123456}},
			pipeline.PhaseSeconds{Read: 1, Decode: 100, Chain: 50, Encode: 20, Write: 3.086}},
		{pipeline.Summary{}, pipeline.PhaseSeconds{}},
	}
	for _, tc := range tests {
		if got := perImageMS(tc.sum); *got != tc.want {
			t.Errorf("perImageMS(%+v) = %+v, want %+v", tc.sum.Phases, *got, tc.want)
		}
	}
}
