package main

import (
	"encoding/json"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/imgpipe/imgpipe/pipeline"
	"github.com/imgpipe/imgpipe/stages/libwebp"
)

// cliStdin runs the CLI with in as its standard input.
func cliStdin(t *testing.T, in string, args ...string) (int, string, string) {
	t.Helper()
	old := stdin
	stdin = strings.NewReader(in)
	t.Cleanup(func() { stdin = old })
	return cli(t, args...)
}

// selectionFolder writes a.png, b.jpg, raw/c.png and raw/deep/d.png (and notes.txt) under a
// new folder.
func selectionFolder(t *testing.T) string {
	dir := t.TempDir()
	rng := rand.New(rand.NewSource(12))
	p := pngBytes(t, photo(rng, 9, 7))
	write(t, dir, "a.png", p)
	write(t, dir, "b.jpg", jpegBytes(t, photo(rng, 9, 7)))
	write(t, dir, "raw/c.png", p)
	write(t, dir, "raw/deep/d.png", p)
	write(t, dir, "notes.txt", []byte("not an image"))
	return dir
}

func TestRunInputSelection(t *testing.T) {
	in := selectionFolder(t)
	old := time.Now().Add(-72 * time.Hour)
	if err := os.Chtimes(filepath.Join(in, "b.jpg"), old, old); err != nil {
		t.Fatal(err)
	}
	patterns := filepath.Join(t.TempDir(), "exclude.txt")
	write(t, filepath.Dir(patterns), "exclude.txt", []byte("# the raw ones\nraw/**\n\n"))
	for _, tc := range []struct {
		name  string
		args  []string
		stdin string
		want  []string // the outputs written
	}{
		{"everything", nil, "", []string{"a.png", "b.png", "raw/c.png", "raw/deep/d.png"}},
		{"include **", []string{"--include", "raw/**"}, "", []string{"raw/c.png", "raw/deep/d.png"}},
		{"include twice", []string{"--include", "a.*", "--include", "**/d.png"}, "", []string{"a.png", "raw/deep/d.png"}},
		{"exclude", []string{"--exclude", "raw/deep/**", "--exclude", "b.jpg"}, "", []string{"a.png", "raw/c.png"}},
		{"ext", []string{"--ext", "jpg"}, "", []string{"b.png"}},
		// As in rclone: a pattern without '/' matches the file name at any depth.
		{"include name", []string{"--include", "*.png"}, "", []string{"a.png", "raw/c.png", "raw/deep/d.png"}},
		{"exclude name", []string{"--exclude", "d.png"}, "", []string{"a.png", "b.png", "raw/c.png"}},
		{"exclude-from", []string{"--exclude-from", patterns}, "", []string{"a.png", "b.png"}},
		{"include-from", []string{"--include-from", patterns, "--include", "b.jpg"}, "", []string{"b.png", "raw/c.png", "raw/deep/d.png"}},
		{"max-age", []string{"--max-age", "1d"}, "", []string{"a.png", "raw/c.png", "raw/deep/d.png"}},
		{"min-age", []string{"--min-age", "2d"}, "", []string{"b.png"}},
		{"min-size", []string{"--min-size", "1b", "--max-size", "1G"}, "", []string{"a.png", "b.png", "raw/c.png", "raw/deep/d.png"}},
		{"single file", []string{"-i", filepath.Join(in, "raw/deep/d.png")}, "", []string{"d.png"}},
		{"stdin list", []string{"-i", "-"}, filepath.Join(in, "raw/c.png") + "\n" + filepath.Join(in, "raw/deep/d.png") + "\n", []string{"c.png", "deep/d.png"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "out")
			args := append([]string{"run", "-i", in, "-o", out, "-p", "decode | save", "-q"}, tc.args...)
			code, _, stderr := cliStdin(t, tc.stdin, args...)
			if code != exitOK {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			got := files(t, out)
			delete(got, "imgpipe-report.jsonl")
			if len(got) != len(tc.want) {
				t.Fatalf("wrote %v, want %v", got, tc.want)
			}
			for _, w := range tc.want {
				if _, ok := got[w]; !ok {
					t.Errorf("no %s among %v", w, got)
				}
			}
		})
	}
}

func TestRunInputSelectionErrors(t *testing.T) {
	in := selectionFolder(t)
	out := filepath.Join(t.TempDir(), "out")
	for _, tc := range []struct {
		name  string
		args  []string
		stdin string
		want  []string
	}{
		{"bad globs, all reported", []string{"--include", "[x", "--exclude", "{a"}, "", []string{`--include "[x"`, `--exclude "{a"`}},
		{"bad ext", []string{"--ext", "a/b"}, "", []string{`--ext "a/b"`}},
		{"bad filters, all reported", []string{"--min-size", "huge", "--max-age", "soon", "--include-from", "/nonexistent/p.txt", "--include", "[x"},
			"", []string{`--min-size "huge"`, `--max-age "soon"`, "--include-from /nonexistent/p.txt", `--include "[x"`}},
		{"empty stdin", []string{"-i", "-"}, "\n\n", []string{"-i -: no paths on stdin"}},
		{"progress mode", []string{"--progress", "fancy"}, "", []string{`--progress "fancy": want one of auto, json, none`}},
		{"env var", []string{"--workers", "1"}, "", nil}, // see below: the flag wins
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"run", "-i", in, "-o", out, "-p", "decode | save", "-q"}, tc.args...)
			code, _, stderr := cliStdin(t, tc.stdin, args...)
			if tc.want == nil {
				return
			}
			if code != exitUsage {
				t.Fatalf("exit %d, want %d: %s", code, exitUsage, stderr)
			}
			for _, w := range tc.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr lacks %q:\n%s", w, stderr)
				}
			}
			if _, err := os.Stat(out); err == nil {
				t.Errorf("a usage error created %s", out)
			}
		})
	}
}

func TestRunEnvironmentSettings(t *testing.T) {
	in := selectionFolder(t)
	out := filepath.Join(t.TempDir(), "out")
	// A bad variable is a usage error that names it; a flag given wins over it.
	t.Setenv("IMGPIPE_WORKERS", "-3")
	code, _, stderr := cli(t, "run", "-i", in, "-o", out, "-p", "decode | save", "-q")
	if code != exitUsage || !strings.Contains(stderr, "$IMGPIPE_WORKERS: workers=-3 is out of range") {
		t.Errorf("IMGPIPE_WORKERS=-3: exit %d, stderr %q", code, stderr)
	}
	if code, _, stderr = cli(t, "run", "-i", in, "-o", out, "-p", "decode | save", "-q", "--workers", "1"); code != exitOK {
		t.Errorf("--workers 1 over IMGPIPE_WORKERS=-3: exit %d: %s", code, stderr)
	}
	// IMGPIPE_ON_ERROR=fail takes effect (the text input fails the run at once, exit 1).
	t.Setenv("IMGPIPE_WORKERS", "")
	t.Setenv("IMGPIPE_ON_ERROR", "fail")
	if code, _, stderr = cli(t, "run", "-i", in, "-o", out, "-p", "decode | save", "-q", "--ext", "txt,png"); code != exitSomeFailed {
		t.Errorf("IMGPIPE_ON_ERROR=fail: exit %d: %s", code, stderr)
	}
	// --device gpu is --device cuda: without a GPU, the same runtime error.
	t.Setenv("IMGPIPE_ON_ERROR", "")
	noGPU(t)
	code, _, stderr = cli(t, "run", "-i", in, "-o", out, "-p", "decode | grayscale | save", "-q", "--device", "gpu")
	if code != exitFatal || !strings.Contains(stderr, "--device cuda: no usable GPU") {
		t.Errorf("--device gpu: exit %d, stderr %q", code, stderr)
	}
	t.Setenv("IMGPIPE_DEVICE", "gpu")
	if code, _, _ = cli(t, "run", "-i", in, "-o", out, "-p", "decode | grayscale | save", "-q"); code != exitFatal {
		t.Errorf("IMGPIPE_DEVICE=gpu: exit %d, want %d", code, exitFatal)
	}
}

func TestRunDryRun(t *testing.T) {
	in := selectionFolder(t)
	write(t, in, "a.jpg", []byte("clashes with a.png by stem"))
	out := filepath.Join(t.TempDir(), "out")
	if err := libwebp.Available(); err != nil {
		t.Skip(err) // save format=webp is refused before a dry run lists anything
	}
	code, stdout, stderr := cli(t, "run", "-i", in, "-o", out, "-p", "decode | save format=webp lossless=true", "--dry-run")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{"a.jpg\t-> a.jpg.webp\n", "a.png\t-> a.png.webp\n", "b.jpg\t-> b.webp\n", "raw/deep/d.png\t-> raw/deep/d.webp\n"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("dry run lacks %q:\n%s", want, stdout)
		}
	}
	if !strings.Contains(stderr, "dry run: 5 inputs: 5 to process, 0 skipped") {
		t.Errorf("stderr %q", stderr)
	}
	if _, err := os.Stat(out); err == nil {
		t.Fatal("a dry run created the output folder")
	}
	// After a real run, --resume --dry-run shows every input as skipped, and still writes
	// nothing (the report is untouched).
	if code, _, stderr := cli(t, "run", "-i", in, "-o", out, "-p", "decode | save", "-q", "--exclude", "a.jpg"); code != exitOK {
		t.Fatalf("run: %d %s", code, stderr)
	}
	before := readFile(t, filepath.Join(out, "imgpipe-report.jsonl"))
	code, stdout, stderr = cli(t, "run", "-i", in, "-o", out, "-p", "decode | save", "--resume", "-n", "--exclude", "a.jpg")
	if code != exitOK || strings.Count(stdout, "skip (done before)") != 4 || !strings.Contains(stderr, "0 to process, 4 skipped") {
		t.Errorf("resume dry run: exit %d\n%s%s", code, stdout, stderr)
	}
	if readFile(t, filepath.Join(out, "imgpipe-report.jsonl")) != before {
		t.Error("a dry run changed the report")
	}
}

func TestProgressJSONLine(t *testing.T) {
	p := newProgress(&strings.Builder{}, false, progressNone, func() int { t.Fatal("counted for no display"); return 0 })
	p.total = 10
	for _, st := range []pipeline.Status{pipeline.StatusSkipped, pipeline.StatusSkipped, pipeline.StatusOK, pipeline.StatusOK, pipeline.StatusFailed, pipeline.StatusOK} {
		p.update(&pipeline.Result{Status: st, Input: "x"})
	}
	l := p.line(p.start.Add(2 * time.Second))
	// 4 images processed in 2 s: 2 img/s; the 2 skipped do not count towards the rate.
	want := progressLine{Done: 6, OK: 3, Failed: 1, Skipped: 2, Total: 10, Elapsed: 2, Rate: 2, ETA: 2}
	if l != want {
		t.Errorf("line %+v, want %+v", l, want)
	}
	// In flight: handed out minus finished.
	p.yielded.Store(9)
	if n := p.inFlight(); n != 3 {
		t.Errorf("in flight %d, want 3", n)
	}
}

func TestRunProgressJSON(t *testing.T) {
	in := selectionFolder(t)
	code, _, stderr := cli(t, "run", "-i", in, "-o", filepath.Join(t.TempDir(), "o"), "-p", "decode | save", "--progress", "json", "-q")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	lines := strings.Split(strings.TrimSpace(stderr), "\n")
	var last progressLine
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &last); err != nil {
		t.Fatalf("last stderr line is not JSON: %v\n%s", err, stderr)
	}
	if last.Done != 4 || last.OK != 4 || last.Total != 4 {
		t.Errorf("final progress %+v, want 4 of 4 done", last)
	}
}

func TestInterruptNotice(t *testing.T) {
	var w strings.Builder
	p := newProgress(&w, false, progressNone, nil)
	p.yielded.Store(5)
	p.update(&pipeline.Result{Status: pipeline.StatusOK})
	// (TestSIGINT checks that a real SIGINT prints it, through the binary.)
	p.interrupted()
	if got := w.String(); got != "imgpipe: interrupting: finishing 4 images (Ctrl-C again to abort)\n" {
		t.Errorf("notice %q", got)
	}
}

func TestValidateModes(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	// Errors of every kind in one file, all in one pass: a key, a stage, a value, the
	// order, values that fail only together, and the input folder's path.
	write(t, dir, "bad.yaml", []byte(`input: {dir: `+filepath.Join(dir, "nope")+`}
pipeline:
  - decode
  - blurr
  - save: {format: gif}
  - grayscale
  - resize: {fit: inside}
output: {dir: out, reprot: x}
`))
	// The chain as a spec string: a second file, validated in the same call.
	order := filepath.Join(dir, "order.yaml")
	write(t, dir, "order.yaml", []byte(`input: {dir: `+filepath.Join(dir, "gone")+`}
pipeline: decode | save format=gif | grayscale
output: {dir: out, reprot: x}
`))
	code, _, stderr := cli(t, "validate", bad, order)
	for _, want := range []string{`bad.yaml:4:5: unknown stage "blurr"`, "bad.yaml:5:5: save must be the last stage", "bad.yaml:5:20: save: format=gif",
		"bad.yaml:7:5: resize: give width, height or both", `bad.yaml:8:20: output: unknown key "reprot"`, "bad.yaml:1:14: input folder: stat",
		"order.yaml:2:20: save must be the last stage", "order.yaml:2:32: save: format=gif", `order.yaml:3:20: output: unknown key "reprot"`, "order.yaml:1:14: input folder: stat"} {
		if code != exitUsage || !strings.Contains(stderr, want) {
			t.Errorf("validate: exit %d, stderr lacks %q:\n%s", code, want, stderr)
		}
	}
	code, stdout, stderr := cliStdin(t, "input: {dir: "+dir+"}\npipeline: decode | save\noutput: {dir: "+filepath.Join(dir, "o")+"}\n", "validate", "-")
	if code != exitOK || stdout != "-: ok: decode | save\n" {
		t.Errorf("validate -: exit %d %q %q", code, stdout, stderr)
	}
	code, stdout, _ = cli(t, "validate", "-p", "decode | blur sigma=2 | save format=npy")
	if code != exitOK || stdout != "ok: decode | blur sigma=2 | save format=npy\n" {
		t.Errorf("validate -p: exit %d %q", code, stdout)
	}
	code, _, stderr = cli(t, "validate", "-p", "decode | blurr | save format=gif | resize")
	if code != exitUsage || !strings.Contains(stderr, "^ col 10: unknown stage") || !strings.Contains(stderr, "format=gif") ||
		!strings.Contains(stderr, "^ col 18: save must be the last stage") || !strings.Contains(stderr, "^ col 36: resize: give width") {
		t.Errorf("validate -p bad: exit %d\n%s", code, stderr)
	}
	code, stdout, _ = cliStdin(t, "decode | resize width=8 | save\n", "validate", "-p", "-")
	if code != exitOK || stdout != "ok: decode | resize width=8 | save\n" {
		t.Errorf("validate -p - : exit %d %q", code, stdout)
	}
	code, _, stderr = cliStdin(t, "decode | resize | save\n", "validate", "-p", "-")
	if code != exitUsage || !strings.Contains(stderr, "^ col 10: resize: give width") {
		t.Errorf("validate -p - bad: exit %d\n%s", code, stderr)
	}
	if code, _, _ = cli(t, "validate"); code != exitUsage {
		t.Errorf("validate with nothing: exit %d", code)
	}
}

func TestStagesJSON(t *testing.T) {
	code, stdout, _ := cli(t, "stages", "--json")
	var got []stageSchema
	if err := json.Unmarshal([]byte(stdout), &got); code != exitOK || err != nil {
		t.Fatalf("exit %d, %v", code, err)
	}
	defs := pipeline.Builtin.Stages()
	if len(got) != len(defs) {
		t.Fatalf("%d stages, want %d", len(got), len(defs))
	}
	for i, d := range defs {
		g := got[i]
		if g.Name != d.Name || g.Help != d.Help || g.GPU != (d.GPU != nil) || len(g.Params) != len(d.Params) {
			t.Errorf("stage %d: %+v, want %s", i, g, d.Name)
			continue
		}
		for j, ps := range d.Params {
			if g.Params[j].Name != ps.Name || g.Params[j].Type != ps.Kind.String() || (ps.Range != nil) != (g.Params[j].Max != nil) {
				t.Errorf("%s.%s: %+v", d.Name, ps.Name, g.Params[j])
			}
		}
	}
}

func TestVersionCompletionMan(t *testing.T) {
	noGPU(t)
	for _, args := range [][]string{{"version"}, {"--version"}} {
		code, stdout, _ := cli(t, args...)
		for _, want := range []string{"imgpipe ", "go1.", "CUDA:", "nvJPEG:", "libjpeg-turbo:", "libwebp:"} {
			if code != exitOK || !strings.Contains(stdout, want) {
				t.Errorf("%v: exit %d, lacks %q:\n%s", args, code, want, stdout)
			}
		}
	}
	for _, shell := range []string{"bash", "zsh", "fish"} {
		code, stdout, _ := cli(t, "completion", shell)
		if code != exitOK || !strings.Contains(stdout, "imgpipe") || len(stdout) < 500 {
			t.Errorf("completion %s: exit %d, %d bytes", shell, code, len(stdout))
		}
	}
	// Enum flags complete to their values.
	code, stdout, _ := cli(t, "__complete", "run", "--device", "")
	if code != exitOK || !strings.Contains(stdout, "auto\ncpu\ncuda\n") {
		t.Errorf("completing --device: %q", stdout)
	}
	code, stdout, _ = cli(t, "man")
	if code != exitOK || !strings.Contains(stdout, ".TH \"IMGPIPE\" \"1\"") || !strings.Contains(stdout, "imgpipe-run(1)") {
		t.Errorf("man: exit %d\n%.300s", code, stdout)
	}
	dir := filepath.Join(t.TempDir(), "man1")
	if code, _, stderr := cli(t, "man", dir); code != exitOK {
		t.Fatalf("man DIR: %d %s", code, stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, "imgpipe-run.1")); err != nil {
		t.Error(err)
	}
}
