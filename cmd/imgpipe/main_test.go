package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image"
	"image/png"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/imgpipe/imgpipe/pipeline"
)

// binaryPath is the imgpipe command built once by TestMain, for the tests that need a real
// process (signals, exit status). On the GPU machine there is no Go toolchain: there it is
// the CLI that gpu-bundle built (.gpu/imgpipe at the repository root), or "" (needBinary
// skips).
var binaryPath string

func TestMain(m *testing.M) {
	if n := os.Getenv(stallEnv); n != "" {
		os.Exit(stallingChild(n))
	}
	if os.Getenv(rssEnv) != "" {
		os.Exit(rssChild())
	}
	dir, err := os.MkdirTemp("", "imgpipe-test-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	if _, err := exec.LookPath("go"); err != nil {
		if bundled, err := filepath.Abs(filepath.Join("..", "..", ".gpu", "imgpipe")); err == nil {
			if _, err := os.Stat(bundled); err == nil {
				binaryPath = bundled
			}
		}
	} else {
		binaryPath = filepath.Join(dir, "imgpipe")
		out, err := exec.Command("go", "build", "-o", binaryPath, ".").CombinedOutput()
		if err != nil {
			fmt.Fprintf(os.Stderr, "go build: %v\n%s", err, out)
			os.RemoveAll(dir)
			os.Exit(2)
		}
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// needBinary skips a test that runs the imgpipe command when there is none (no Go
// toolchain and no bundled CLI).
func needBinary(t *testing.T) {
	t.Helper()
	if binaryPath == "" {
		t.Skip("no imgpipe binary: no Go toolchain to build one, and no .gpu/imgpipe")
	}
}

// cli runs the CLI in-process and returns its exit code, stdout and stderr.
func cli(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), args, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

func TestRunMixedFolder(t *testing.T) {
	in, good, bad := mixedFolder(t)
	out := filepath.Join(t.TempDir(), "out")
	code, stdout, stderr := cli(t, "run", "-i", in, "-o", out, "-p", chain, "--workers", "3", "--device", "cpu")
	if code != exitSomeFailed {
		t.Fatalf("exit %d, want 1; stderr:\n%s", code, stderr)
	}
	if stdout != "" {
		t.Errorf("stdout: %q", stdout)
	}
	lines, sum := readReport(t, filepath.Join(out, "imgpipe-report.jsonl"))
	if len(lines) != len(good)+len(bad) || sum.OK != len(good) || sum.Failed != len(bad) || sum.Device != "cpu" {
		t.Fatalf("%d lines, summary %+v", len(lines), sum)
	}
	var names []string
	for _, l := range lines {
		names = append(names, l.Input)
		if want, isBad := bad[l.Input]; isBad {
			if l.Status != pipeline.StatusFailed || !strings.HasPrefix(l.Error, want) || l.Output != "" {
				t.Errorf("%s: %+v, want error %q", l.Input, l, want)
			}
			continue
		}
		if l.Status != pipeline.StatusOK || len(l.Histogram) != 256 || l.Width == 0 {
			t.Errorf("%s: %+v", l.Input, l)
		}
		var n uint64
		for _, c := range l.Histogram {
			n += c
		}
		if n != uint64(l.Width*l.Height) {
			t.Errorf("%s: histogram counts %d pixels of %dx%d", l.Input, n, l.Width, l.Height)
		}
		// The output is there, complete, transposed and gray.
		f, err := os.Open(filepath.Join(out, l.Output))
		if err != nil {
			t.Fatal(err)
		}
		m, err := png.Decode(f)
		f.Close()
		if err != nil {
			t.Fatalf("%s: %v", l.Output, err)
		}
		if b := m.Bounds(); b.Dx() != l.Height || b.Dy() != l.Width {
			t.Errorf("%s is %v, want %dx%d", l.Output, b, l.Height, l.Width)
		}
		if _, ok := m.(*image.Gray); !ok {
			t.Errorf("%s is %T, want gray", l.Output, m)
		}
	}
	want := "a.png b.jpg big-but-ok.png hostile-hdr.png nested/c.png nested/deeper/d.JPG nested/trunc.png text.jpg too-big.png truncated.jpg zero.png"
	if got := strings.Join(names, " "); got != want {
		t.Errorf("report order:\n got %s\nwant %s", got, want)
	}
	outs := files(t, out)
	if len(outs) != len(good)+1 { // + the report
		t.Errorf("output folder holds %d files: %v", len(outs), outs)
	}
	for _, w := range []string{"processed 11 images: 5 ok, 6 failed, 0 skipped in ", "MP/s) on cpu", "imgpipe: zero.png: decode: empty file"} {
		if !strings.Contains(stderr, w) {
			t.Errorf("stderr lacks %q:\n%s", w, stderr)
		}
	}

	// --resume redoes nothing: the good inputs are skipped, untouched; the bad fail again.
	code, _, stderr = cli(t, "run", "-i", in, "-o", out, "-p", chain, "--resume")
	if code != exitSomeFailed {
		t.Fatalf("resume: exit %d\n%s", code, stderr)
	}
	lines2, sum2 := readReport(t, filepath.Join(out, "imgpipe-report.jsonl"))
	if sum2.Skipped != len(good) || sum2.OK != 0 || sum2.Failed != len(bad) {
		t.Errorf("resume summary %+v", sum2)
	}
	for i, l := range lines2 {
		if l.Status == pipeline.StatusSkipped && (l.Output != lines[i].Output || len(l.Histogram) != 256 || l.Width != lines[i].Width) {
			t.Errorf("skipped line lost details: %+v", l)
		}
	}
	for name, fi := range files(t, out) {
		if name != "imgpipe-report.jsonl" && !fi.ModTime().Equal(outs[name].ModTime()) {
			t.Errorf("%s was rewritten by --resume", name)
		}
	}
	if !strings.Contains(stderr, "0 ok, 6 failed, 5 skipped") {
		t.Errorf("resume stderr: %s", stderr)
	}
}

func TestRunAllGoodExitsZero(t *testing.T) {
	in := t.TempDir()
	rng := rand.New(rand.NewSource(2))
	write(t, in, "x.png", pngBytes(t, photo(rng, 10, 10)))
	write(t, in, "y.png", pngBytes(t, photo(rng, 7, 3)))
	out := filepath.Join(t.TempDir(), "o")
	report := filepath.Join(t.TempDir(), "r", "report.jsonl")
	code, _, stderr := cli(t, "run", "-i", in, "-o", out, "-p", "decode | save format=jpeg quality=50", "--report", report, "--device", "cpu", "-q")
	if code != exitOK || stderr != "" {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	if _, sum := readReport(t, report); sum.OK != 2 {
		t.Errorf("summary %+v", sum)
	}
	if got := files(t, out); len(got) != 2 || got["x.jpg"] == nil || got["y.jpg"] == nil {
		t.Errorf("outputs %v", got)
	}
}

func TestRunNameClash(t *testing.T) {
	in := t.TempDir()
	rng := rand.New(rand.NewSource(3))
	for _, n := range []string{"a.jpg", "a.png", "a.JPG", "b.png", "sub/a.png"} {
		if strings.HasSuffix(strings.ToLower(n), ".jpg") {
			write(t, in, n, jpegBytes(t, photo(rng, 8, 8)))
		} else {
			write(t, in, n, pngBytes(t, photo(rng, 8, 8)))
		}
	}
	out := t.TempDir()
	if code, _, stderr := cli(t, "run", "-i", in, "-o", out, "-p", "decode | save"); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	got := files(t, out)
	for _, w := range []string{"a.jpg.png", "a.png.png", "a.JPG.png", "b.png", "sub/a.png", "imgpipe-report.jsonl"} {
		if got[w] == nil {
			t.Errorf("no %s in %v", w, got)
		}
	}
	if len(got) != 6 {
		t.Errorf("outputs %v", got)
	}
}

func TestRunOnErrorFail(t *testing.T) {
	in := t.TempDir()
	rng := rand.New(rand.NewSource(4))
	for i := 0; i < 30; i++ {
		write(t, in, fmt.Sprintf("%02d.png", i), pngBytes(t, photo(rng, 16, 16)))
	}
	write(t, in, "05.png", []byte("broken"))
	out := t.TempDir()
	code, _, stderr := cli(t, "run", "-i", in, "-o", out, "-p", "decode | save", "--on-error", "fail", "--workers", "1")
	if code != exitSomeFailed || !strings.Contains(stderr, "stopped at the first failed input: 05.png: decode: unknown image format") {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	lines, sum := readReport(t, filepath.Join(out, "imgpipe-report.jsonl"))
	if !sum.Stopped || sum.Failed != 1 || len(lines) < 6 || len(lines) > 8 || lines[5].Status != pipeline.StatusFailed {
		t.Errorf("%d lines, summary %+v", len(lines), sum)
	}
}

func TestRunUsageErrors(t *testing.T) {
	in, _, _ := mixedFolder(t)
	tests := []struct {
		name string
		args []string
		code int
		want []string
	}{
		{"bad spec", []string{"run", "-i", in, "-o", "OUT", "-p", "decode | blurr sigma=1.5 | save format=gif"}, exitUsage, []string{
			"imgpipe: bad pipeline spec:",
			"  decode | blurr sigma=1.5 | save format=gif\n           ^ col 10: unknown stage \"blurr\" (did you mean \"blur\"?)",
			"^ col 40: save: format=gif: want one of png, jpeg",
		}},
		{"planner", []string{"run", "-i", in, "-o", "OUT", "-p", "grayscale | save"}, exitUsage, []string{"col 1: the chain must start with decode or load, not grayscale"}},
		{"no input", []string{"run", "-o", "OUT", "-p", "decode"}, exitUsage, []string{"no input folder: set input.dir in the job or -i"}},
		{"no output", []string{"run", "-i", in, "-p", "decode | save"}, exitUsage, []string{"no output folder"}},
		{"missing input", []string{"run", "-i", in + "/nope", "-o", "OUT", "-p", "decode"}, exitUsage, []string{"input folder: stat", "no such file or directory"}},
		{"output is input", []string{"run", "-i", in, "-o", in, "-p", "decode"}, exitUsage, []string{"the output folder is the input folder"}},
		{"streams", []string{"run", "-i", in, "-o", "OUT", "-p", "decode", "--streams", "0"}, exitUsage, []string{"--streams: streams=0 is out of range [1, 64]"}},
		{"batch", []string{"run", "-i", in, "-o", "OUT", "-p", "decode", "--batch", "5000"}, exitUsage, []string{"--batch: batch=5000 is out of range"}},
		{"on-error", []string{"run", "-i", in, "-o", "OUT", "-p", "decode", "--on-error", "ignore"}, exitUsage, []string{"--on-error: on_error=ignore: want one of skip, fail"}},
		{"device", []string{"run", "-i", in, "-o", "OUT", "-p", "decode", "--device", "gpus"}, exitUsage, []string{"--device: device=gpus: want one of auto, cpu, cuda"}},
		{"workers", []string{"run", "-i", in, "-o", "OUT", "-p", "decode", "--workers", "-1"}, exitUsage, []string{"--workers: workers=-1 is out of range"}},
		{"all flag errors at once", []string{"run", "-i", in, "-o", "OUT", "-p", "decode", "--streams", "0", "--batch", "-1"}, exitUsage, []string{"--streams", "--batch"}},
		{"unknown flag", []string{"run", "--frobnicate"}, exitUsage, []string{"unknown flag: --frobnicate", "see 'imgpipe run --help'"}},
		{"flag value", []string{"run", "--workers", "many"}, exitUsage, []string{"invalid argument \"many\""}},
		{"unknown command", []string{"runn"}, exitUsage, []string{"unknown command \"runn\"", "Run 'imgpipe --help' for usage."}},
		{"two jobs", []string{"run", "a.yaml", "b.yaml"}, exitUsage, []string{"accepts at most 1 arg"}},
		{"missing job", []string{"run", "nope.yaml"}, exitUsage, []string{"open nope.yaml: no such file"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wd, _ := os.Getwd()
			tmp := t.TempDir()
			for i, a := range tt.args {
				if a == "OUT" {
					tt.args[i] = filepath.Join(tmp, "out")
				}
			}
			code, stdout, stderr := cli(t, tt.args...)
			if code != tt.code {
				t.Errorf("exit %d, want %d\n%s", code, tt.code, stderr)
			}
			for _, w := range tt.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr lacks %q:\n%s", w, stderr)
				}
			}
			if stdout != "" {
				t.Errorf("stdout: %q", stdout)
			}
			// Nothing was processed: no output folder, no report.
			if _, err := os.Stat(filepath.Join(tmp, "out")); err == nil {
				t.Error("output folder created")
			}
			if wd2, _ := os.Getwd(); wd2 != wd {
				t.Fatal("working directory changed")
			}
		})
	}
}

func TestRunJob(t *testing.T) {
	in, good, bad := mixedFolder(t)
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	job := filepath.Join(dir, "job.yaml")
	write(t, dir, "job.yaml", []byte(fmt.Sprintf(`input: {dir: %q}
pipeline:
  - decode: {max_pixels: 300000}
  - grayscale
  - histogram
  - save: {format: png}
output: {dir: %q}
execution: {device: cpu, workers: 2, on_error: skip}
`, in, filepath.Join(dir, "job-out"))))
	// Flags override the job: here the output folder and the worker count.
	code, _, stderr := cli(t, "run", job, "-o", out, "--workers", "1")
	if code != exitSomeFailed {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	_, sum := readReport(t, filepath.Join(out, "imgpipe-report.jsonl"))
	if sum.OK != len(good) || sum.Failed != len(bad) || sum.Workers != 1 || sum.Pipeline != "decode max_pixels=300000 | grayscale | histogram | save format=png" {
		t.Errorf("summary %+v", sum)
	}
	if _, err := os.Stat(filepath.Join(dir, "job-out")); err == nil {
		t.Error("the job's own output folder was used despite -o")
	}
	// -p replaces the job's chain.
	code, _, stderr = cli(t, "run", job, "-o", out, "-p", "decode | histogram", "--report", filepath.Join(dir, "r.jsonl"))
	if _, sum := readReport(t, filepath.Join(dir, "r.jsonl")); code != exitSomeFailed || sum.Pipeline != "decode | histogram" {
		t.Errorf("exit %d, summary %+v\n%s", code, sum, stderr)
	}
}

func TestJobErrorsCarryLineCol(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "bad.yaml", []byte(`input: {dir: photos, recurse: yes}
pipeline:
  - decode
  - blur: {sigma: 99}
  - blurr
output: {dir: out}
execution: {streams: 0}
`))
	job := filepath.Join(dir, "bad.yaml")
	want := []string{
		job + `:1:22: input: unknown key "recurse" (keys: dir)`,
		job + `:4:19: blur: sigma=99 is out of range (0, 32]`,
		job + `:5:5: unknown stage "blurr" (did you mean "blur"?)`,
		job + `:7:22: execution.streams: streams=0 is out of range [1, 64]`,
	}
	for _, cmd := range []string{"run", "validate"} {
		code, _, stderr := cli(t, cmd, job)
		if code != exitUsage {
			t.Errorf("%s: exit %d", cmd, code)
		}
		for _, w := range want {
			if !strings.Contains(stderr, "imgpipe: "+w+"\n") {
				t.Errorf("%s: stderr lacks %q:\n%s", cmd, w, stderr)
			}
		}
	}
	// validate also checks the input folder, at the position of input.dir.
	write(t, dir, "nofolder.yaml", []byte("input: {dir: /nonexistent/photos}\npipeline: [decode, save]\noutput: {dir: out}\n"))
	code, _, stderr := cli(t, "validate", filepath.Join(dir, "nofolder.yaml"))
	if code != exitUsage || !strings.Contains(stderr, "nofolder.yaml:1:14: input folder: stat /nonexistent/photos: no such file or directory") {
		t.Errorf("exit %d\n%s", code, stderr)
	}
}

func TestValidateSampleJobs(t *testing.T) {
	needBinary(t)
	cmd := exec.Command(binaryPath, "validate", "samples/job.yaml", "samples/thumbs.yaml")
	cmd.Dir = filepath.Join("..", "..") // the sample jobs' paths are relative to the repository root
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if !strings.Contains(string(out), "samples/job.yaml: ok: decode | grayscale | blur sigma=1.5 | transpose | histogram | save format=png") {
		t.Errorf("output:\n%s", out)
	}
}

func TestStagesAndVersion(t *testing.T) {
	code, stdout, _ := cli(t, "stages")
	if code != 0 {
		t.Fatal(code)
	}
	// The list comes from the registry: every stage and every parameter is in it.
	for _, d := range pipeline.Builtin.Stages() {
		if !strings.Contains(stdout, "\n"+d.Name+" ") || !strings.Contains(stdout, d.Help) {
			t.Errorf("stages lacks %s", d.Name)
		}
		if gpu := regexp.MustCompile(`\n` + d.Name + ` +(pixel|array) stage \+GPU `).MatchString(stdout); gpu != (d.GPU != nil) {
			t.Errorf("stages marks %s +GPU: %v", d.Name, gpu)
		}
		for _, p := range d.Params {
			if !strings.Contains(stdout, "  "+p.Name+" ") || !strings.Contains(stdout, p.Help) {
				t.Errorf("stages lacks %s.%s", d.Name, p.Name)
			}
		}
	}
	code, stdout, _ = cli(t, "stages", "blur")
	if code != 0 || !strings.Contains(stdout, "Separable Gaussian") || strings.Contains(stdout, "boxblur") {
		t.Errorf("stages blur: %d\n%s", code, stdout)
	}
	code, _, stderr := cli(t, "stages", "blurr")
	if code != exitUsage || !strings.Contains(stderr, `no stage "blurr"`) {
		t.Errorf("stages blurr: %d %s", code, stderr)
	}
	code, stdout, _ = cli(t, "version")
	if code != 0 || !strings.HasPrefix(stdout, "imgpipe ") {
		t.Errorf("version: %d %q", code, stdout)
	}
	code, stdout, _ = cli(t, "run", "--help")
	if code != 0 || !strings.Contains(stdout, "imgpipe run -i photos -o out -p") || !strings.Contains(stdout, "Exit status") {
		t.Errorf("run --help: %d\n%s", code, stdout)
	}
}

func TestTrace(t *testing.T) {
	in := t.TempDir()
	rng := rand.New(rand.NewSource(5))
	for i := 0; i < 6; i++ {
		write(t, in, fmt.Sprintf("%d.png", i), pngBytes(t, photo(rng, 20, 10)))
	}
	trace := filepath.Join(t.TempDir(), "trace.json")
	code, _, stderr := cli(t, "run", "-i", in, "-o", t.TempDir(), "-p", "decode | blur | save", "--trace", trace, "--workers", "2", "--device", "cpu")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	data, err := os.ReadFile(trace)
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		TraceEvents []struct {
			Name string
			Ph   string
			Tid  int
			Args map[string]any
		}
	}
	if err := json.Unmarshal(data, &file); err != nil {
		t.Fatalf("trace is not JSON: %v", err)
	}
	count := map[string]int{}
	tracks := map[string]bool{}
	for _, e := range file.TraceEvents {
		if e.Ph == "M" && e.Name == "thread_name" {
			tracks[e.Args["name"].(string)] = true
		} else if e.Ph == "X" {
			count[e.Name]++
		}
	}
	if count["decode"] != 6 || count["blur"] != 6 || count["save"] != 6 || !tracks["cpu worker 1"] {
		t.Errorf("spans %v, tracks %v", count, tracks)
	}
}

// SIGINT stops the run: exit 130, no partial or temporary file, a complete report that
// lists every output written.
func TestSIGINT(t *testing.T) {
	needBinary(t)
	in := t.TempDir()
	rng := rand.New(rand.NewSource(6))
	img := pngBytes(t, photo(rng, 200, 150))
	for i := 0; i < 160; i++ {
		write(t, in, fmt.Sprintf("d%d/%03d.png", i%4, i), img)
	}
	out := filepath.Join(t.TempDir(), "out")
	cmd := exec.Command(binaryPath, "run", "-i", in, "-o", out, "-p", "decode | blur sigma=6 | save compression=9", "--workers", "2")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Interrupt once a few outputs exist, mid-run.
	deadline := time.Now().Add(30 * time.Second)
	for {
		ents, _ := os.ReadDir(filepath.Join(out, "d0"))
		if len(ents) >= 3 {
			break
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatal("no output after 30s")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	err := cmd.Wait()
	var ee *exec.ExitError
	if !errorsAs(err, &ee) || ee.ExitCode() != exitInterrupted {
		t.Fatalf("exit: %v\n%s", err, stderr.String())
	}
	if !strings.Contains(stderr.String(), "imgpipe: interrupted; the report covers the") ||
		!regexp.MustCompile(`imgpipe: interrupting: finishing \d+ images \(Ctrl-C again to abort\)\n`).MatchString(stderr.String()) {
		t.Errorf("stderr:\n%s", stderr.String())
	}
	lines, sum := readReport(t, filepath.Join(out, "imgpipe-report.jsonl"))
	if !sum.Interrupted || sum.OK == 0 || sum.OK >= 160 || len(lines) != sum.OK {
		t.Errorf("summary %+v, %d lines", sum, len(lines))
	}
	written := files(t, out) // fails on any temporary file left
	delete(written, "imgpipe-report.jsonl")
	listed := map[string]bool{}
	for _, l := range lines {
		listed[l.Output] = true
	}
	for name := range written {
		if !listed[name] {
			t.Errorf("%s written but not in the report", name)
		}
		f, _ := os.Open(filepath.Join(out, name))
		if _, err := png.Decode(f); err != nil {
			t.Errorf("%s is not a complete PNG: %v", name, err)
		}
		f.Close()
	}
	if len(written) != len(lines) {
		t.Errorf("%d outputs, %d report lines", len(written), len(lines))
	}
	// And --resume finishes the job without redoing what was done.
	again, err := exec.Command(binaryPath, "run", "-i", in, "-o", out, "-p", "decode | blur sigma=6 | save compression=9", "--resume", "-q").CombinedOutput()
	_, sum2 := readReport(t, filepath.Join(out, "imgpipe-report.jsonl"))
	if err != nil || sum2.Skipped != sum.OK || sum2.OK != 160-sum.OK {
		t.Errorf("resume after interrupt: %v, %+v\n%s", err, sum2, again)
	}
}

func errorsAs(err error, target **exec.ExitError) bool {
	e, ok := err.(*exec.ExitError)
	if ok {
		*target = e
	}
	return ok && e.Sys().(syscall.WaitStatus).Exited()
}

func TestSummaryLine(t *testing.T) {
	tests := []struct {
		s    pipeline.Summary
		want string
	}{
		{pipeline.Summary{OK: 118, Failed: 2, Seconds: 3.2, MegapixelsPerSecond: 45.1, Device: "cpu"},
			"processed 120 images: 118 ok, 2 failed, 0 skipped in 3.2s (45.1 MP/s) on cpu"},
		{pipeline.Summary{Skipped: 1, Seconds: 0.042, Device: "cpu"},
			"processed 1 image: 0 ok, 0 failed, 1 skipped in 0.04s (0.0 MP/s) on cpu"},
		{pipeline.Summary{OK: 10, Seconds: 12, MegapixelsPerSecond: 900, Device: "NVIDIA H200", Streams: 4, Batch: 16},
			"processed 10 images: 10 ok, 0 failed, 0 skipped in 12.0s (900.0 MP/s) on NVIDIA H200 (4 streams, batch 16)"},
		{pipeline.Summary{OK: 10, Seconds: 1, MegapixelsPerSecond: 9, Device: "GPU 0 (A), GPU 1 (B)", Streams: 2, Batch: 4, Batches: 3,
			DeviceWallSeconds: 0.5, Overlap: 1.2, GPUs: []pipeline.GPUSummary{{Device: "GPU 0 (A)", Batches: 2}, {Device: "GPU 1 (B)", Batches: 1}}},
			"processed 10 images: 10 ok, 0 failed, 0 skipped in 1.0s (9.0 MP/s) on GPU 0 (A), GPU 1 (B) (2 streams, batch 4; 3 batches (2 + 1 per GPU), " +
				"H2D 0.000s, kernels 0.000s, D2H 0.000s in 0.500s of device time, overlap efficiency 1.20)"},
		{pipeline.Summary{OK: 40, Seconds: 0.5, Device: "GPU 0 (A)", Streams: 4, Batch: 8, CPUFallback: 1, CPUStart: 12},
			"processed 40 images: 40 ok, 0 failed, 0 skipped in 0.50s (0.0 MP/s) on GPU 0 (A) (4 streams, batch 8" +
				"; 1 too large for a slot, run on the CPU; 12 run on the CPU while the GPU opened)"},
	}
	for _, tt := range tests {
		if got := summaryLine(tt.s); got != tt.want {
			t.Errorf("got  %s\nwant %s", got, tt.want)
		}
	}
}
