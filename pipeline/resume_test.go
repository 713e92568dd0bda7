package pipeline

import (
	"bytes"
	"context"
	"encoding/json"
	"math/rand"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/imgpipe/imgpipe/stages/stagestest"
)

// Resume skips an input only when the chain, the input file and the output are what the
// previous report says; any change redoes what it touches.
func TestResumeRedoesWhatChanged(t *testing.T) {
	const chain = "decode | grayscale | save"
	tests := []struct {
		name    string
		change  func(t *testing.T, in, out string) // after the first run
		chain   string                             // of the resumed run
		skipped int                                // of the 4 inputs
	}{
		{"nothing changed", func(*testing.T, string, string) {}, chain, 4},
		{"another chain", func(*testing.T, string, string) {}, "decode | grayscale | blur sigma=8 | save", 0},
		{"another parameter", func(*testing.T, string, string) {}, "decode | grayscale | save compression=9", 0},
		{"an input rewritten, same size", func(t *testing.T, in, _ string) {
			p := filepath.Join(in, "b.png")
			data, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, data, 0o644); err != nil {
				t.Fatal(err)
			}
			// Another modification time, as a copy or an edit gives.
			if err := os.Chtimes(p, time.Now(), time.Now().Add(time.Hour)); err != nil {
				t.Fatal(err)
			}
		}, chain, 3},
		{"an input of another size", func(t *testing.T, in, _ string) {
			rng := rand.New(rand.NewSource(3))
			writeFiles(t, in, map[string][]byte{"c.png": stagestest.Encode(t, stagestest.ReadImage(rng, 31, 9, 3), "png")})
		}, chain, 3},
		{"an output replaced by a link", func(t *testing.T, _, out string) {
			p := filepath.Join(out, "a.png")
			if err := os.Remove(p); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink("b.png", p); err != nil {
				t.Fatal(err)
			}
		}, chain, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in, out := t.TempDir(), t.TempDir()
			rng := rand.New(rand.NewSource(1))
			files := map[string][]byte{}
			for _, n := range []string{"a.png", "b.png", "c.png", "d\xff.png"} {
				files[n] = stagestest.Encode(t, stagestest.ReadImage(rng, 12, 9, 3), "png")
			}
			writeFiles(t, in, files)
			first := runReport(t, compileWith(t, Builtin, chain), Folder(in, out), out)
			tt.change(t, in, out)
			plan := compileWith(t, Builtin, tt.chain)
			second := runReport(t, plan, Resume(Folder(in, out), plan, out, bytes.NewReader(first)), out)
			lines := reportLines(t, string(second))
			var sum struct{ Summary Summary }
			if err := json.Unmarshal([]byte(lines[len(lines)-1]), &sum); err != nil {
				t.Fatal(err)
			}
			if sum.Summary.Skipped != tt.skipped || sum.Summary.Total() != 4 {
				t.Errorf("summary %+v, want %d skipped\n%s", sum.Summary, tt.skipped, second)
			}
		})
	}
}

func runReport(t *testing.T, plan *Plan, src Source, out string) []byte {
	t.Helper()
	var report bytes.Buffer
	if _, err := Run(context.Background(), plan, src, ToFolder(out), Options{Workers: 2, Report: &report}); err != nil {
		t.Fatal(err)
	}
	return report.Bytes()
}

// Names that are not valid UTF-8 are reported losslessly: two names that differ only in
// their invalid bytes stay two lines, each with its exact bytes, and a resume matches each
// exactly (nothing is redone).
func TestReportNonUTF8Names(t *testing.T) {
	in, out := t.TempDir(), t.TempDir()
	rng := rand.New(rand.NewSource(2))
	names := []string{"x\xfe.png", "x\xff.png"}
	for _, n := range names {
		writeFiles(t, in, map[string][]byte{n: stagestest.Encode(t, stagestest.ReadImage(rng, 5, 4, 3), "png")})
	}
	plan := compileWith(t, Builtin, "decode | save")
	first := runReport(t, plan, Folder(in, out), out)
	lines := reportLines(t, string(first))
	for i, n := range names {
		var l ReportLine
		if err := json.Unmarshal([]byte(lines[i]), &l); err != nil {
			t.Fatal(err)
		}
		if l.name() != n || l.output() != stem(n)+".png" || l.Status != StatusOK {
			t.Errorf("line %d: %s", i, lines[i])
		}
	}
	second := runReport(t, plan, Resume(Folder(in, out), plan, out, bytes.NewReader(first)), out)
	var sum struct{ Summary Summary }
	lines = reportLines(t, string(second))
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &sum); err != nil || sum.Summary.Skipped != 2 {
		t.Errorf("resume: %+v %v", sum.Summary, err)
	}
}

// The newest previous report decides for the inputs it lists: a journal that lists an
// input as failed makes it redone even though the older report had it ok; inputs the
// journal does not reach are taken from the older report.
func TestResumeNewestReportFirst(t *testing.T) {
	in, out := t.TempDir(), t.TempDir()
	rng := rand.New(rand.NewSource(4))
	for _, n := range []string{"a.png", "b.png", "c.png"} {
		writeFiles(t, in, map[string][]byte{n: stagestest.Encode(t, stagestest.ReadImage(rng, 5, 4, 3), "png")})
	}
	plan := compileWith(t, Builtin, "decode | save")
	old := runReport(t, plan, Folder(in, out), out)
	journal := []byte(`{"input":"a.png","status":"failed","error":"x"}` + "\n")
	second := runReport(t, plan, Resume(Folder(in, out), plan, out, bytes.NewReader(journal), bytes.NewReader(old)), out)
	var sum struct{ Summary Summary }
	lines := reportLines(t, string(second))
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &sum); err != nil || sum.Summary.Skipped != 2 || sum.Summary.OK != 1 {
		t.Errorf("summary %+v %v", sum.Summary, err)
	}
}

// ResumeOutputs asks its check about each output a previous line names, by the output's
// slash path, and redoes exactly the inputs whose output the check does not find.
func TestResumeOutputsCheck(t *testing.T) {
	in, out := t.TempDir(), t.TempDir()
	rng := rand.New(rand.NewSource(5))
	for _, n := range []string{"a.png", "s/b.png", "s/c.png"} {
		writeFiles(t, in, map[string][]byte{n: stagestest.Encode(t, stagestest.ReadImage(rng, 5, 4, 3), "png")})
	}
	plan := compileWith(t, Builtin, "decode | save")
	first := runReport(t, plan, Folder(in, out), out)
	tests := []struct {
		name    string
		missing map[string]bool // outputs the check does not find
		skipped int
	}{
		{"all there", nil, 3},
		{"one gone", map[string]bool{"s/b.png": true}, 2},
		{"all gone", map[string]bool{"a.png": true, "s/b.png": true, "s/c.png": true}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var asked []string
			has := func(_ context.Context, name string) bool {
				asked = append(asked, name)
				return !tt.missing[name]
			}
			second := runReport(t, plan, ResumeOutputs(Folder(in, out), plan, has, bytes.NewReader(first)), out)
			lines := reportLines(t, string(second))
			var sum struct{ Summary Summary }
			if err := json.Unmarshal([]byte(lines[len(lines)-1]), &sum); err != nil || sum.Summary.Skipped != tt.skipped || sum.Summary.OK != 3-tt.skipped {
				t.Errorf("summary %+v %v, want %d skipped", sum.Summary, err, tt.skipped)
			}
			if want := []string{"a.png", "s/b.png", "s/c.png"}; !slices.Equal(asked, want) {
				t.Errorf("asked about %q, want %q", asked, want)
			}
		})
	}
}
