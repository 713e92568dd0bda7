package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/imgpipe/imgpipe/pipeline/folderrun"
)

// TestRunBucketResume: --resume with a bucket output reads the previous report object (or
// the local --report file and its journal), checks each input's chain, size and
// modification time and its output object as a folder run does, and redoes the rest; a
// run killed before it wrote its report object (there is none) redoes everything. Inputs
// are a folder or a bucket.
func TestRunBucketResume(t *testing.T) {
	const inputs = 7 // queueFolder(t, 6): six images and a corrupt file, failed each time
	tests := []struct {
		name        string
		bucketInput bool
		localReport bool                               // --report a local file (with its journal)
		change      func(t *testing.T, in, out string) // between the runs
		dryRun      bool                               // check --dry-run's plan of the resumed run first
		skipped     int
		msg         string // on the resumed run's stderr
	}{
		{name: "nothing changed", change: func(*testing.T, string, string) {}, dryRun: true, skipped: 6},
		{name: "bucket input", bucketInput: true, change: func(*testing.T, string, string) {}, skipped: 6},
		{name: "an output object gone", change: func(t *testing.T, _, out string) {
			if err := os.Remove(filepath.Join(out, "d0", "p000.png")); err != nil {
				t.Fatal(err)
			}
		}, dryRun: true, skipped: 5},
		{name: "an input changed", bucketInput: true, change: func(t *testing.T, in, _ string) {
			if err := os.Chtimes(filepath.Join(in, "d1", "p001.png"), time.Now(), time.Now().Add(time.Hour)); err != nil {
				t.Fatal(err)
			}
		}, skipped: 5},
		{name: "killed before its report", change: func(t *testing.T, _, out string) {
			if err := os.Remove(filepath.Join(out, folderrun.ReportName)); err != nil {
				t.Fatal(err)
			}
		}, skipped: 0, msg: "no previous report"},
		{name: "local report", localReport: true, change: func(*testing.T, string, string) {}, skipped: 6},
		{name: "local report, killed run's journal", localReport: true, change: func(t *testing.T, _, out string) {
			// A journal that lists one input as failed decides for it over the report.
			report := filepath.Join(filepath.Dir(out), "r.jsonl")
			line := `{"input":"d0/p000.png","status":"failed","error":"x"}` + "\n"
			if err := os.WriteFile(folderrun.JournalPath(report), []byte(line), 0o644); err != nil {
				t.Fatal(err)
			}
		}, skipped: 5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in, out := queueFolder(t, 6), filepath.Join(t.TempDir(), "out")
			if err := os.Mkdir(out, 0o755); err != nil {
				t.Fatal(err)
			}
			inLoc, outURL := in, "file://"+filepath.ToSlash(out)+"?metadata=skip&no_tmp_dir=1"
			if tt.bucketInput {
				inLoc = "file://" + filepath.ToSlash(in)
			}
			args := []string{"run", "-i", inLoc, "-o", outURL, "-p", chain}
			report := filepath.Join(out, folderrun.ReportName)
			if tt.localReport {
				report = filepath.Join(filepath.Dir(out), "r.jsonl")
				args = append(args, "--report", report)
			}
			if code, _, stderr := cli(t, append(args, "-q")...); code != 1 {
				t.Fatalf("first run: exit %d (want 1: the corrupt file), %s", code, stderr)
			}
			first := outputs(t, out)
			tt.change(t, in, out)
			args = append(args, "--resume") // not quiet: the notice is checked
			if tt.dryRun {
				code, stdout, stderr := cli(t, append(args, "--dry-run")...)
				if n := strings.Count(stdout, "skip (done before)"); code != 0 || n != tt.skipped {
					t.Errorf("dry run: exit %d, %d skipped, want %d\n%s%s", code, n, tt.skipped, stdout, stderr)
				}
			}
			code, _, stderr := cli(t, args...)
			if code != 1 || !strings.Contains(stderr, tt.msg) {
				t.Fatalf("resumed run: exit %d, %q; want 1 with %q", code, stderr, tt.msg)
			}
			lines, sum := readReport(t, report)
			if len(lines) != inputs || sum.Skipped != tt.skipped || sum.OK != 6-tt.skipped || sum.Failed != 1 {
				t.Errorf("resumed report: %d lines, summary %+v; want %d lines, %d skipped", len(lines), sum, inputs, tt.skipped)
			}
			second := outputs(t, out)
			if len(second) != len(first) {
				t.Errorf("%d outputs after the resume, %d before", len(second), len(first))
			}
			for name, b := range first {
				if !bytes.Equal(second[name], b) {
					t.Errorf("output %s differs after the resume", name)
				}
			}
		})
	}
}

// outputs reads the image outputs under dir (the report is not one), by slash path.
func outputs(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	got := map[string][]byte{}
	for name := range files(t, dir) {
		if name == folderrun.ReportName {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(name)))
		if err != nil {
			t.Fatal(err)
		}
		got[name] = b
	}
	return got
}
