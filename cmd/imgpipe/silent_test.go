package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestNoSilentNoOps: what would do nothing, silently, is an error naming its parameter or
// flag (exit 2), found by validate too; zero inputs is a warning and exit 4.
func TestNoSilentNoOps(t *testing.T) {
	in := selectionFolder(t)
	dir := t.TempDir()
	job := filepath.Join(dir, "job.yaml")
	write(t, dir, "job.yaml", []byte("input:\n  dir: "+in+"\noutput:\n  dir: "+filepath.Join(dir, "o")+"\npipeline: decode | grayscale\n"))
	empty := t.TempDir()
	for _, tc := range []struct {
		name  string
		stdin string
		args  []string
		code  int
		want  []string // in stderr
		not   string   // not in stderr
	}{
		{"quality on png", "", []string{"run", "-i", in, "-o", "OUT", "-p", "decode | save quality=80"}, exitUsage,
			[]string{"col 23: save: quality=80 has no effect with the default format=png (it applies to format=jpeg|webp only)"}, ""},
		{"validate lossless on jpeg", "", []string{"validate", "-p", "decode | save format=jpeg lossless=true"}, exitUsage,
			[]string{"save: lossless=true has no effect with format=jpeg (it applies to format=webp only)"}, ""},
		{"quality on lossless webp", "", []string{"validate", "-p", "decode | save format=webp lossless=true quality=50"}, exitUsage,
			[]string{"quality=50 has no effect with lossless=true"}, ""},
		{"compression on jpeg", "", []string{"validate", "-p", "decode | save format=jpeg compression=9"}, exitUsage,
			[]string{"compression=9 has no effect with format=jpeg"}, ""},
		{"quality on jpeg", "", []string{"validate", "-p", "decode | save format=jpeg quality=80"}, exitOK, nil, "imgpipe:"},
		{"no save into a folder", "", []string{"run", "-i", in, "-o", filepath.Join(dir, "nosave"), "-p", "decode | grayscale"}, exitUsage,
			[]string{`the chain "decode | grayscale" has no save stage, so nothing would be written into the output folder`}, "processed"},
		{"validate: no save into a folder", "", []string{"validate", job}, exitUsage, []string{job + ":4:8: the chain"}, ""},
		{"report-only chain into a folder", "", []string{"run", "-i", in, "-o", filepath.Join(dir, "hist"), "-p", "decode | histogram"}, exitOK,
			[]string{"processed 4 images"}, ""},
		{"check only, a report and no folder", "", []string{"run", "-i", in, "--report", filepath.Join(dir, "r.jsonl"), "-p", "decode"}, exitOK,
			[]string{"processed 4 images"}, ""},
		{"zero inputs", "", []string{"run", "-i", empty, "-o", filepath.Join(dir, "none"), "-p", "decode | save"}, exitNoInputs,
			[]string{"imgpipe: no input selected", "nothing was done (exit 4)"}, "processed"},
		{"zero inputs selected", "", []string{"run", "-i", in, "-o", filepath.Join(dir, "none2"), "-p", "decode | save", "--include", "*.gif"}, exitNoInputs,
			[]string{"no input selected"}, "processed"},
		{"zero inputs, quiet", "", []string{"run", "-q", "-i", empty, "-o", filepath.Join(dir, "none3"), "-p", "decode | save"}, exitNoInputs,
			[]string{"no input selected"}, ""},
		{"NUL list with -0", filepath.Join(in, "a.png") + "\x00" + filepath.Join(in, "raw/c.png") + "\x00", []string{"run", "-i", "-", "-0", "-o", filepath.Join(dir, "nul"), "-p", "decode | save"}, exitOK,
			[]string{"processed 2 images: 2 ok"}, ""},
		{"NUL list with --null, no last NUL", filepath.Join(in, "a.png") + "\x00" + filepath.Join(in, "b.jpg"), []string{"run", "-i", "-", "--null", "-o", filepath.Join(dir, "nul2"), "-p", "decode | save"}, exitOK,
			[]string{"processed 2 images: 2 ok"}, ""},
		{"NUL list without -0", filepath.Join(in, "a.png") + "\x00" + filepath.Join(in, "raw/c.png") + "\x00", []string{"run", "-i", "-", "-o", filepath.Join(dir, "nul3"), "-p", "decode | save"}, exitUsage,
			[]string{"-i -: file list: line 1 holds a NUL byte: for a NUL-separated list (find -print0) give -0/--null"}, "processed"},
		{"-0 without -i -", "", []string{"run", "-i", in, "-0", "-o", filepath.Join(dir, "nul4"), "-p", "decode | save"}, exitUsage,
			[]string{"-0/--null reads a NUL-separated list of paths on stdin: it needs -i -"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr := cliStdin(t, tc.stdin, tc.args...)
			if code != tc.code {
				t.Fatalf("exit %d, want %d; stderr:\n%s", code, tc.code, stderr)
			}
			for _, w := range tc.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr lacks %q:\n%s", w, stderr)
				}
			}
			if tc.not != "" && strings.Contains(stderr, tc.not) {
				t.Errorf("stderr has %q:\n%s", tc.not, stderr)
			}
		})
	}
	if _, err := os.Stat(filepath.Join(dir, "nosave")); err == nil {
		t.Error("a refused chain made its output folder")
	}
}

// TestProgressJSONPure: with --progress json every stderr line is a JSON object of a known
// type, usage errors and warnings included; without it, the same messages are text.
func TestProgressJSONPure(t *testing.T) {
	in, _, _ := mixedFolder(t)
	dir := t.TempDir()
	types := map[string]bool{"progress": true, "notice": true, "warning": true, "failure": true, "summary": true, "error": true}
	for _, tc := range []struct {
		name string
		args []string
		code int
		want []string // the types that must appear
	}{
		{"run with failures", []string{"run", "-i", in, "-o", filepath.Join(dir, "a"), "-p", "decode | save"}, exitSomeFailed, []string{"progress", "failure", "summary"}},
		{"bad spec", []string{"run", "-i", in, "-o", filepath.Join(dir, "b"), "-p", "decode | blurr"}, exitUsage, []string{"error"}},
		{"bad flag value", []string{"run", "-i", in, "-o", filepath.Join(dir, "c"), "-p", "decode | save", "--streams", "0"}, exitUsage, []string{"error"}},
		{"zero inputs", []string{"run", "-i", t.TempDir(), "-o", filepath.Join(dir, "d"), "-p", "decode | save"}, exitNoInputs, []string{"warning"}},
		{"dry run", []string{"run", "-n", "-i", in, "-o", filepath.Join(dir, "e"), "-p", "decode | save"}, exitOK, []string{"notice"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr := cli(t, append(tc.args, "--progress", "json")...)
			if code != tc.code {
				t.Fatalf("exit %d, want %d; stderr:\n%s", code, tc.code, stderr)
			}
			seen := map[string]bool{}
			for _, line := range strings.Split(strings.TrimSuffix(stderr, "\n"), "\n") {
				var obj map[string]any
				if err := json.Unmarshal([]byte(line), &obj); err != nil {
					t.Fatalf("not a JSON line: %q (%v)", line, err)
				}
				typ, _ := obj["type"].(string)
				if !types[typ] {
					t.Errorf("line of type %q: %s", typ, line)
				}
				seen[typ] = true
				if typ == "summary" {
					if s, ok := obj["summary"].(map[string]any); !ok || s["failed"] == nil {
						t.Errorf("summary without the report's object: %s", line)
					}
				}
				if typ == "error" && obj["exit"] != float64(tc.code) {
					t.Errorf("error with exit %v, want %d: %s", obj["exit"], tc.code, line)
				}
			}
			for _, w := range tc.want {
				if !seen[w] {
					t.Errorf("no %s line:\n%s", w, stderr)
				}
			}
		})
	}
}

// TestMessages: a misspelt flag gets a suggestion, and a run that did nothing says why
// without a "processed 0 images" line.
func TestMessages(t *testing.T) {
	in := selectionFolder(t)
	out := filepath.Join(t.TempDir(), "out")
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"workers", []string{"run", "-i", in, "-o", out, "-p", "decode | save", "--worker", "2"}, "unknown flag: --worker; did you mean --workers? (see 'imgpipe run --help')"},
		{"include", []string{"run", "-i", in, "-o", out, "-p", "decode | save", "--incldue", "a"}, "did you mean --include?"},
		{"nothing near", []string{"run", "-i", in, "-o", out, "-p", "decode | save", "--zzzzzzzz"}, "unknown flag: --zzzzzzzz (see"},
		{"wait", []string{"wait", "--nme", "x"}, "did you mean --name?"},
		{"no report with --server", []string{"run", "-i", in, "-o", out, "-p", "decode | save", "--report", "none", "--server", "http://127.0.0.1:9"}, "not '-' (nor --report none)"},
		{"no report with submit", []string{"submit", "-i", in, "-o", out, "-p", "decode | save", "--report", "none", "--queue", "nats://127.0.0.1:9"}, "--report none: wait writes the job's report"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr := cli(t, tc.args...)
			if code != exitUsage || !strings.Contains(stderr, tc.want) {
				t.Errorf("exit %d, stderr %q; want 2 and %q", code, stderr, tc.want)
			}
		})
	}
	// Interrupted before any input: the notice alone, no "processed 0 images" before it.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var so, se strings.Builder
	code := run(ctx, []string{"run", "-i", in, "-o", out, "-p", "decode | save"}, &so, &se)
	if strings.Contains(se.String(), "processed 0") || code == exitOK {
		t.Errorf("cancelled run: exit %d, stderr %q", code, se.String())
	}
}
