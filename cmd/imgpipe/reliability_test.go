package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/imgpipe/imgpipe/pipeline"
	"github.com/imgpipe/imgpipe/pipeline/folderrun"
)

// stallEnv makes the test binary a stalling imgpipe (see stallingChild).
const stallEnv = "IMGPIPE_TEST_STALL_AFTER"

// stallingChild runs the CLI on os.Args[1:] as main does (same signals), but after the
// n-th result it says "stalled" on stderr and waits for a signal, so the parent can kill
// or signal it at an exact point: n inputs reported, the rest not.
func stallingChild(n string) int {
	after, _ := strconv.Atoi(n)
	ctx, stop := signal.NotifyContext(context.Background(), stopSignals...)
	defer stop()
	count := 0
	resultHook = func(*pipeline.Result) {
		if count++; count == after {
			fmt.Fprintln(os.Stderr, "stalled")
			<-ctx.Done()
		}
	}
	return run(ctx, os.Args[1:], os.Stdout, os.Stderr)
}

// startStalled starts the test binary as a stalling imgpipe and returns once it stalled.
func startStalled(t *testing.T, after int, args ...string) (*exec.Cmd, *bytes.Buffer) {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), stallEnv+"="+strconv.Itoa(after))
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	rest := &bytes.Buffer{}
	sc := bufio.NewScanner(stderr)
	for sc.Scan() {
		if sc.Text() == "stalled" {
			go func() { // keep draining, so the child never blocks on stderr
				for sc.Scan() {
					rest.WriteString(sc.Text() + "\n")
				}
			}()
			return cmd, rest
		}
		rest.WriteString(sc.Text() + "\n")
	}
	cmd.Wait()
	t.Fatalf("the child ended without stalling:\n%s", rest)
	return nil, nil
}

func pngFolder(t *testing.T, n int) string {
	in := t.TempDir()
	rng := rand.New(rand.NewSource(int64(n)))
	for i := 0; i < n; i++ {
		write(t, in, fmt.Sprintf("%02d.png", i), pngBytes(t, photo(rng, 16+i, 12)))
	}
	return in
}

// A run killed outright (SIGKILL, as the OOM killer does) leaves its journal, and
// --resume skips exactly the inputs reported before the kill.
func TestKilledRunResumes(t *testing.T) {
	in := pngFolder(t, 12)
	out := filepath.Join(t.TempDir(), "out")
	args := []string{"run", "-i", in, "-o", out, "-p", "decode | grayscale | save", "--device", "cpu", "--workers", "1"}
	cmd, _ := startStalled(t, 5, args...)
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	if _, err := os.Stat(filepath.Join(out, folderrun.ReportName)); err == nil {
		t.Fatal("a killed run has a final report")
	}
	code, _, stderr := cli(t, append(args, "--resume")...)
	if code != exitOK {
		t.Fatalf("resume: exit %d\n%s", code, stderr)
	}
	_, sum := readReport(t, filepath.Join(out, folderrun.ReportName))
	if sum.Skipped != 5 || sum.OK != 7 {
		t.Errorf("resume after SIGKILL: %+v, want 5 skipped and 7 done", sum)
	}
	if _, err := os.Stat(folderrun.JournalPath(filepath.Join(out, folderrun.ReportName))); err == nil {
		t.Error("the journal is left after a finished run")
	}
}

// SIGHUP (a closed terminal) stops a run like SIGINT and SIGTERM: exit 130, the report
// covers what was done, and nothing in flight is reported failed.
func TestSignalsStopCleanly(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGHUP, syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			in := pngFolder(t, 8)
			out := filepath.Join(t.TempDir(), "out")
			cmd, stderr := startStalled(t, 3, "run", "-i", in, "-o", out, "-p", "decode | save", "--device", "cpu", "--workers", "2")
			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			err := cmd.Wait()
			if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != exitInterrupted {
				t.Fatalf("exit %v\n%s", err, stderr)
			}
			lines, sum := readReport(t, filepath.Join(out, folderrun.ReportName))
			if !sum.Interrupted || sum.Failed != 0 || sum.OK < 3 || len(lines) != sum.OK {
				t.Errorf("%+v, %d lines", sum, len(lines))
			}
		})
	}
}

// An interrupt at an exact point (a hook, not a timer): exit 130 at once, in-flight
// inputs are not reported at all (never failed), and --resume does the rest. At the
// interrupt at most pipeline.ReorderSpan windows of inputs (2 workers: 4) have been taken,
// so more inputs than that are certainly left.
func TestInterruptIsFastAndResumable(t *testing.T) {
	const inputs = 4*pipeline.ReorderSpan + 20
	in := pngFolder(t, inputs)
	out := filepath.Join(t.TempDir(), "out")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	n := 0
	resultHook = func(*pipeline.Result) {
		if n++; n == 4 {
			cancel()
		}
	}
	defer func() { resultHook = nil }()
	args := []string{"run", "-i", in, "-o", out, "-p", "decode | blur sigma=2 | save", "--device", "cpu", "--workers", "2"}
	var stdout, stderr bytes.Buffer
	if code := run(ctx, args, &stdout, &stderr); code != exitInterrupted {
		t.Fatalf("exit %d\n%s", code, stderr.String())
	}
	resultHook = nil
	lines, sum := readReport(t, filepath.Join(out, folderrun.ReportName))
	if sum.Failed != 0 || sum.OK < 4 || sum.OK >= inputs || len(lines) != sum.OK {
		t.Fatalf("%+v, %d lines", sum, len(lines))
	}
	code, _, errOut := cli(t, append(args, "--resume", "-q")...)
	_, sum2 := readReport(t, filepath.Join(out, folderrun.ReportName))
	if code != exitOK || sum2.Skipped != sum.OK || sum2.OK != inputs-sum.OK {
		t.Errorf("resume: exit %d, %+v\n%s", code, sum2, errOut)
	}
}

// A second run into an output folder another run holds is refused at once, naming it, and
// takes nothing of the first's (its temporary files stay).
func TestConcurrentRunRefused(t *testing.T) {
	in := pngFolder(t, 3)
	out := t.TempDir()
	lock, err := folderrun.LockFolder(out)
	if err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Join(out, ".a.png.tmp123")
	write(t, out, ".a.png.tmp123", []byte("the other run's"))
	code, _, stderr := cli(t, "run", "-i", in, "-o", out, "-p", "decode | save", "--device", "cpu")
	if code != exitFatal || !strings.Contains(stderr, fmt.Sprintf("another imgpipe run (pid %d, started", os.Getpid())) || !strings.Contains(stderr, "is writing into") {
		t.Errorf("exit %d\n%s", code, stderr)
	}
	if _, err := os.Stat(tmp); err != nil {
		t.Errorf("the other run's temporary file was taken: %v", err)
	}
	lock.Unlock()
	if code, _, stderr := cli(t, "run", "-i", in, "-o", out, "-p", "decode | save", "--device", "cpu"); code != exitOK {
		t.Errorf("after the lock is released: exit %d\n%s", code, stderr)
	}
}

// Nothing the run writes can clobber: a link inside the output folder does not lead
// outputs onto inputs, and --report and --trace refuse inputs, the report, links, FIFOs,
// devices and folders. Each case fails (exit 2 or an input failed) and changes nothing.
func TestWritesCannotClobber(t *testing.T) {
	type env struct{ root, in, out string }
	tests := []struct {
		name  string
		setup func(t *testing.T, e env) []string // extra flags
		code  int
		want  string
	}{
		{"link in the output folder", func(t *testing.T, e env) []string {
			write(t, e.in, "b/a.png", pngBytes(t, photo(rand.New(rand.NewSource(1)), 4, 4)))
			if err := os.Symlink(filepath.Join(e.in, "sub"), filepath.Join(e.out, "sub")); err != nil {
				t.Fatal(err)
			}
			return nil
		}, exitSomeFailed, "sub/x.png: save: sub is a symbolic link"},
		{"trace is an input", func(t *testing.T, e env) []string {
			return []string{"--trace", filepath.Join(e.in, "sub", "x.png")}
		}, exitUsage, "lies inside the input folder"},
		{"report is an input", func(t *testing.T, e env) []string {
			return []string{"--report", filepath.Join(e.in, "sub", "x.png")}
		}, exitUsage, "lies inside the input folder"},
		{"trace is the report", func(t *testing.T, e env) []string {
			return []string{"--trace", filepath.Join(e.out, folderrun.ReportName)}
		}, exitUsage, "is the report"},
		{"trace is a link", func(t *testing.T, e env) []string {
			p := filepath.Join(e.root, "t.json")
			if err := os.Symlink(filepath.Join(e.in, "sub", "x.png"), p); err != nil {
				t.Fatal(err)
			}
			return []string{"--trace", p}
		}, exitUsage, "exists and is a symbolic link"},
		{"report is a FIFO", func(t *testing.T, e env) []string {
			p := filepath.Join(e.root, "fifo")
			if err := syscall.Mkfifo(p, 0o644); err != nil {
				t.Fatal(err)
			}
			return []string{"--report", p}
		}, exitUsage, "exists and is a named pipe"},
		{"trace is a device", func(t *testing.T, e env) []string {
			return []string{"--trace", "/dev/full"}
		}, exitUsage, "exists and is a device"},
		{"trace is a folder", func(t *testing.T, e env) []string {
			return []string{"--trace", e.root}
		}, exitUsage, "exists and is a folder"},
		{"both on stdout", func(t *testing.T, e env) []string {
			return []string{"--trace", "-", "--report", "-"}
		}, exitUsage, "would both write to standard output"},
		{"resume without a report file", func(t *testing.T, e env) []string {
			return []string{"--report", "-", "--resume"}
		}, exitUsage, "--resume reads the previous report"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			e := env{root, filepath.Join(root, "in"), filepath.Join(root, "out")}
			x := pngBytes(t, photo(rand.New(rand.NewSource(2)), 5, 5))
			write(t, e.in, "sub/x.png", x)
			if err := os.MkdirAll(e.out, 0o755); err != nil {
				t.Fatal(err)
			}
			extra := tt.setup(t, e)
			args := append([]string{"run", "-i", e.in, "-o", e.out, "-p", "decode | save", "--device", "cpu"}, extra...)
			code, _, stderr := cli(t, args...)
			if code != tt.code || !strings.Contains(stderr, tt.want) {
				t.Errorf("exit %d, want %d with %q\n%s", code, tt.code, tt.want, stderr)
			}
			if got, _ := os.ReadFile(filepath.Join(e.in, "sub", "x.png")); !bytes.Equal(got, x) {
				t.Error("an input was changed")
			}
		})
	}
}

// "-" sends the report, or the trace, to standard output; nothing named "-" is made.
func TestDashIsStdout(t *testing.T) {
	in := pngFolder(t, 2)
	dir := t.TempDir()
	t.Chdir(dir)
	code, stdout, stderr := cli(t, "run", "-i", in, "-o", "out", "-p", "decode | save", "--device", "cpu", "--report", "-")
	if code != exitOK || strings.Count(stdout, "\n") != 3 || !strings.Contains(stdout, `{"summary":`) {
		t.Errorf("report: exit %d, stdout %q\n%s", code, stdout, stderr)
	}
	code, stdout, stderr = cli(t, "run", "-i", in, "-o", "out2", "-p", "decode | save", "--device", "cpu", "--trace", "-")
	if code != exitOK || !strings.Contains(stdout, `"traceEvents"`) {
		t.Errorf("trace: exit %d, stdout %q\n%s", code, stdout, stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, "-")); err == nil {
		t.Error(`a file named "-" was made`)
	}
}

// A trace that cannot be written fails the run (exit 3) after the summary, not silently.
func TestTraceFailureIsFatal(t *testing.T) {
	in := pngFolder(t, 2)
	dir := t.TempDir()
	tdir := filepath.Join(dir, "traces")
	if err := os.Mkdir(tdir, 0o755); err != nil {
		t.Fatal(err)
	}
	// The trace's folder becomes a file during the run (root can write anywhere else).
	resultHook = func(*pipeline.Result) {
		if os.RemoveAll(tdir) == nil {
			os.WriteFile(tdir, nil, 0o644)
		}
	}
	defer func() { resultHook = nil }()
	code, _, stderr := cli(t, "run", "-i", in, "-o", filepath.Join(dir, "out"), "-p", "decode | save", "--device", "cpu", "--trace", filepath.Join(tdir, "t.json"))
	if code != exitFatal || !strings.Contains(stderr, "processed 2 images") || !strings.Contains(stderr, "--trace") {
		t.Errorf("exit %d\n%s", code, stderr)
	}
}

// A job's report follows -o: the old output folder's report is never written over.
func TestJobReportFollowsOutput(t *testing.T) {
	in := pngFolder(t, 2)
	dir := t.TempDir()
	old := filepath.Join(dir, "old")
	job := filepath.Join(dir, "job.yaml")
	write(t, dir, "job.yaml", []byte(fmt.Sprintf("input: {dir: %s}\npipeline: [decode, save]\noutput: {dir: %s, report: %s}\n", in, old, filepath.Join(old, "r.jsonl"))))
	write(t, old, "r.jsonl", []byte("the old run's\n"))
	code, _, stderr := cli(t, "run", job, "-o", filepath.Join(dir, "new"), "--device", "cpu")
	if code != exitOK {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	if got, _ := os.ReadFile(filepath.Join(old, "r.jsonl")); string(got) != "the old run's\n" {
		t.Error("the old report was written over")
	}
	if _, err := os.Stat(filepath.Join(dir, "new", "r.jsonl")); err != nil {
		t.Error(err)
	}
}

// Files padded far beyond their pixels are refused unread: six 1×1 PNGs of 700 MB each
// (sparse) under a 64 MB budget keep the process's peak RSS small (measured in a child).
func TestPaddedFilesBoundedRSS(t *testing.T) {
	needBinary(t)
	in := t.TempDir()
	tiny := pngBytes(t, photo(rand.New(rand.NewSource(5)), 1, 1))
	for i := 0; i < 6; i++ {
		p := filepath.Join(in, fmt.Sprintf("%d.png", i))
		write(t, in, fmt.Sprintf("%d.png", i), tiny)
		if err := os.Truncate(p, 700<<20); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(binaryPath, "run", "-i", in, "-o", filepath.Join(t.TempDir(), "out"), "-p", "decode | save",
		"--device", "cpu", "--max-memory-mb", "64", "-q")
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != exitSomeFailed || !strings.Contains(string(out), "far more than a 1x1 image can take") {
		t.Fatalf("exit %v\n%s", err, out)
	}
	ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	if !ok {
		t.Skip("no rusage here")
	}
	// Maxrss is in KiB on Linux. A child started with vfork (as os/exec does) begins with
	// this process's high-water mark (exec records the mm it leaves), so with many tests
	// in this process only a peak above that mark is surely the child's own.
	var self syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &self); err != nil {
		t.Fatal(err)
	}
	peak, inherited := ru.Maxrss<<10, self.Maxrss<<10
	switch {
	case peak > 200<<20 && peak > inherited:
		t.Errorf("peak RSS %d MiB under a 64 MiB budget", peak>>20)
	case peak > 200<<20:
		t.Logf("peak RSS %d MiB is this test process's (%d MiB), not the child's; run the test alone to measure it", peak>>20, inherited>>20)
	}
}

// A dry run takes no lock and writes no journal: it runs beside a run that holds the
// folder, and --resume reads a killed run's journal where it lies, leaving it there.
func TestDryRunTakesNoLockNorJournal(t *testing.T) {
	in := pngFolder(t, 4)
	out := filepath.Join(t.TempDir(), "out")
	args := []string{"run", "-i", in, "-o", out, "-p", "decode | save", "--device", "cpu", "-q"}
	if code, _, stderr := cli(t, args...); code != exitOK {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	// As a killed run leaves it: a journal and no report.
	report := filepath.Join(out, folderrun.ReportName)
	if err := os.Rename(report, folderrun.JournalPath(report)); err != nil {
		t.Fatal(err)
	}
	journal := readFile(t, folderrun.JournalPath(report))
	lock, err := folderrun.LockFolder(out)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Unlock()
	code, stdout, stderr := cli(t, append(args, "--resume", "--dry-run")...)
	if code != exitOK || strings.Count(stdout, "skip (done before)") != 4 {
		t.Errorf("dry run beside a locked folder: exit %d\n%s%s", code, stdout, stderr)
	}
	if readFile(t, folderrun.JournalPath(report)) != journal {
		t.Error("a dry run changed the journal")
	}
	ents, _ := os.ReadDir(out)
	for _, e := range ents {
		if n := e.Name(); n != folderrun.RunInfoName && n != filepath.Base(folderrun.JournalPath(report)) && !strings.HasSuffix(n, ".png") {
			t.Errorf("a dry run left %s", n)
		}
	}
}

// With a single file as the input, the report and the trace cannot be that file.
func TestWritesCannotClobberInputFile(t *testing.T) {
	dir := t.TempDir()
	img := pngBytes(t, photo(rand.New(rand.NewSource(2)), 4, 4))
	write(t, dir, "a.png", img)
	file := filepath.Join(dir, "a.png")
	for _, flag := range []string{"--report", "--trace"} {
		code, _, stderr := cli(t, "run", "-i", file, "-o", filepath.Join(dir, "out"), "-p", "decode | save", "--device", "cpu", flag, file)
		if code != exitUsage || !strings.Contains(stderr, "is the input file") {
			t.Errorf("%s the input: exit %d\n%s", flag, code, stderr)
		}
	}
	if got, _ := os.ReadFile(file); !bytes.Equal(got, img) {
		t.Error("the input file changed")
	}
}
