package pipeline

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"testing"

	"github.com/imgpipe/imgpipe/stages/stagestest"
)

// TestRunPhases: a folder run charges every phase; a run from memory reads nothing; a
// chain without save encodes nothing. The summary line carries the figures.
func TestRunPhases(t *testing.T) {
	rng := rand.New(rand.NewSource(4))
	in := t.TempDir()
	var inputs []Input
	for i := range 3 {
		data := stagestest.Encode(t, stagestest.ReadImage(rng, 30, 20, 3), "png")
		if err := os.WriteFile(filepath.Join(in, fmt.Sprintf("%d.png", i)), data, 0o644); err != nil {
			t.Fatal(err)
		}
		inputs = append(inputs, Input{Name: fmt.Sprintf("%d.png", i), Data: data})
	}
	save := compileWith(t, Builtin, "decode | grayscale | blur | save")
	noSave := compileWith(t, Builtin, "decode | grayscale | histogram")
	type want struct{ read, decode, chain, encode bool }
	tests := []struct {
		name string
		run  func(opt Options) (Summary, error)
		want want
	}{
		{"folder", func(opt Options) (Summary, error) {
			out := t.TempDir()
			return Run(context.Background(), save, Folder(in, out), ToFolder(out), opt)
		}, want{true, true, true, true}},
		{"memory", func(opt Options) (Summary, error) {
			return Run(context.Background(), save, Inputs(inputs...), Collect(), opt)
		}, want{false, true, true, true}},
		{"no save", func(opt Options) (Summary, error) {
			return Run(context.Background(), noSave, Inputs(inputs...), Discard(), opt)
		}, want{false, true, true, false}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var report bytes.Buffer
			sum, err := tc.run(Options{Workers: 2, Report: &report})
			if err != nil || sum.OK != 3 {
				t.Fatalf("%+v, %v", sum, err)
			}
			p := sum.Phases
			got := want{p.Read > 0, p.Decode > 0, p.Chain > 0, p.Encode > 0}
			if got != tc.want || p.Write < 0 {
				t.Errorf("phases %+v: read, decode, chain, encode > 0 = %+v, want %+v", p, got, tc.want)
			}
			lines := bytes.Split(bytes.TrimSpace(report.Bytes()), []byte("\n"))
			var last struct{ Summary Summary }
			if err := json.Unmarshal(lines[len(lines)-1], &last); err != nil || last.Summary.Phases != p {
				t.Errorf("summary line %s: phases %+v, %v; want %+v", lines[len(lines)-1], last.Summary.Phases, err, p)
			}
		})
	}
}
