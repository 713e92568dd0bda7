package folderrun_test

// The rules of README's "What imgpipe guarantees", each tried on every route a run takes
// to the file system: a folder walked (-i DIR), one file (-i FILE), a list on stdin
// (-i -), and a bucket (file://, the one a test can reach). A hostile set-up plants what
// could lead a write astray or hang a read; every case checks that the inputs are as they
// were, and a watchdog turns a hang into a failure instead of a stuck test binary.

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"image"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/imgpipe/imgpipe/pipeline"
	"github.com/imgpipe/imgpipe/pipeline/folderrun"
	"github.com/imgpipe/imgpipe/stages/npy"
)

var routes = []string{"folder", "file", "stdin", "bucket"}

// env is one case's folders: in holds sub/x.png and y.png, out is the output folder.
type env struct {
	t             *testing.T
	root, in, out string
	route         string
	inputs        map[string][]byte
	report, stdin string // Request.Report and Stdin; set by newEnv, changed by set-ups
	input, output string
	spec          string
	resume        bool
}

func newEnv(t *testing.T, route string) *env {
	root := t.TempDir()
	e := &env{t: t, root: root, in: filepath.Join(root, "in"), out: filepath.Join(root, "out"), route: route,
		inputs: map[string][]byte{}, spec: "decode | save format=png"}
	if err := writePNGs(filepath.Join(e.in, "sub"), "x.png"); err != nil {
		t.Fatal(err)
	}
	if err := writePNGs(e.in, "y.png"); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"sub/x.png", "y.png"} {
		b, err := os.ReadFile(filepath.Join(e.in, n))
		if err != nil {
			t.Fatal(err)
		}
		e.inputs[n] = b
	}
	if err := os.MkdirAll(e.out, 0o755); err != nil {
		t.Fatal(err)
	}
	switch route {
	case "folder":
		e.input, e.output = e.in, e.out
	case "file":
		e.input, e.output = filepath.Join(e.in, "sub", "x.png"), e.out
	case "stdin":
		e.input, e.output = folderrun.StdinInput, e.out
		e.stdin = filepath.Join(e.in, "sub", "x.png") + "\n" + filepath.Join(e.in, "y.png") + "\n"
	case "bucket":
		e.input, e.output = "file://"+filepath.ToSlash(e.in), "file://"+filepath.ToSlash(e.out)
	}
	return e
}

// outName is where the route puts x.png's output, relative to the output folder.
func (e *env) outName() string {
	if e.route == "file" {
		return "x.png"
	}
	return "sub/x.png"
}

// reportPath is the report file the run keeps.
func (e *env) reportPath() string {
	if e.report != "" {
		return e.report
	}
	return filepath.Join(e.out, folderrun.ReportName)
}

// run runs the case's request, failing the test if it does not end within a minute.
func (e *env) run() (pipeline.Summary, error) {
	e.t.Helper()
	plan, err := pipeline.CompileSpec(e.spec)
	if err != nil {
		e.t.Fatal(err)
	}
	ex := pipeline.DefaultExecution()
	ex.Device, ex.Resume = "cpu", e.resume
	r := folderrun.Request{Plan: plan, Input: e.input, Output: e.output, Report: e.report, Exec: ex,
		Stdin: strings.NewReader(e.stdin), Stdout: &bytes.Buffer{}}
	if e.route == "stdin" && e.stdin == "" {
		r.Stdin = endless{}
	}
	type result struct {
		sum pipeline.Summary
		err error
	}
	done := make(chan result, 1)
	go func() {
		sum, err := folderrun.Run(context.Background(), r)
		done <- result{sum, err}
	}()
	select {
	case res := <-done:
		return res.sum, res.err
	case <-time.After(time.Minute): // a watchdog, not a timing: a pass never waits on it
		e.t.Fatalf("%s: the run hangs", e.route)
	}
	return pipeline.Summary{}, nil
}

// checkInputs fails the test if an input changed.
func (e *env) checkInputs() {
	e.t.Helper()
	for n, want := range e.inputs {
		got, err := os.ReadFile(filepath.Join(e.in, filepath.FromSlash(n)))
		if err != nil || !bytes.Equal(got, want) {
			e.t.Errorf("%s: input %s was changed (%d bytes, %v)", e.route, n, len(got), err)
		}
	}
}

// endless is a stdin that never ends: empty lines forever.
type endless struct{}

func (endless) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = '\n'
	}
	return len(p), nil
}

func symlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}

func mkfifo(t *testing.T, p string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(p, 0o644); err != nil {
		t.Fatal(err)
	}
}

// hostileInput adds the input name (data) to the inputs of the route, and the chain spec
// when one is given (an array chain takes only the arrays), for a case where that input
// alone fails.
func (e *env) hostileInput(t *testing.T, name string, data []byte, spec string) outcome {
	t.Helper()
	if err := os.WriteFile(filepath.Join(e.in, name), data, 0o644); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(e.in, name)
	switch e.route {
	case "file":
		e.input = p
	case "stdin":
		e.stdin += p + "\n"
	}
	if spec != "" {
		e.spec = spec
		if e.route == "stdin" {
			e.stdin = p + "\n"
		}
	}
	return outcome{failed: 1}
}

// hugePNG is a one-pixel PNG whose header claims w×h pixels (its CRC fixed).
func hugePNG(t *testing.T, w, h uint32) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := png.Encode(&b, image.NewGray(image.Rect(0, 0, 1, 1))); err != nil {
		t.Fatal(err)
	}
	d := b.Bytes()
	ihdr := d[8+8 : 8+8+13] // after the signature and IHDR's length and type
	binary.BigEndian.PutUint32(ihdr[0:], w)
	binary.BigEndian.PutUint32(ihdr[4:], h)
	binary.BigEndian.PutUint32(d[8+8+13:], crc32.ChecksumIEEE(d[8+4:8+8+13]))
	return d
}

// outcome is what a case expects of the run: a bad request (nothing done), a failure, or
// a run that ends with the given inputs failed.
type outcome struct {
	bad, fail bool
	failed    int
	want      string // in the error, or in a failed input's reason
}

func (o outcome) check(t *testing.T, route string, sum pipeline.Summary, err error) {
	t.Helper()
	var bad *folderrun.RequestError
	var fail *folderrun.RunError
	switch {
	case o.bad && !errors.As(err, &bad), o.fail && !errors.As(err, &fail):
		t.Errorf("%s: %T %v, want a bad request %v or a failure %v", route, err, err, o.bad, o.fail)
	case !o.bad && !o.fail && err != nil:
		t.Errorf("%s: %v", route, err)
	case !o.bad && !o.fail && sum.Failed != o.failed:
		t.Errorf("%s: %d failed, want %d", route, sum.Failed, o.failed)
	case !o.bad && !o.fail && sum.Skipped != 0:
		t.Errorf("%s: %d skipped, want none", route, sum.Skipped)
	case o.want != "" && err != nil && !strings.Contains(err.Error(), o.want):
		t.Errorf("%s: %v, want %q", route, err, o.want)
	}
}

// Each rule, with its hostile set-up, on every route: the set-up returns what the run must
// do there (and may skip a route the rule does not apply to).
func TestGuaranteesOnEveryRoute(t *testing.T) {
	tests := []struct {
		rule  string
		setup func(t *testing.T, e *env) (outcome, bool)
	}{
		{"writes: an output's folder is a link to the inputs", func(t *testing.T, e *env) (outcome, bool) {
			if e.route == "file" {
				symlink(t, filepath.Join(e.in, "sub", "x.png"), filepath.Join(e.out, "x.png")) // replaced, not followed
				return outcome{}, true
			}
			symlink(t, filepath.Join(e.in, "sub"), filepath.Join(e.out, "sub"))
			return outcome{failed: 1}, true
		}},
		{"writes: the lock note is a link to an input", func(t *testing.T, e *env) (outcome, bool) {
			symlink(t, filepath.Join(e.in, "y.png"), filepath.Join(e.out, folderrun.RunInfoName))
			return outcome{}, e.route != "bucket" // a bucket run takes no lock
		}},
		{"writes: the journal is a link to an input", func(t *testing.T, e *env) (outcome, bool) {
			symlink(t, filepath.Join(e.in, "y.png"), folderrun.JournalPath(e.reportPath()))
			return outcome{}, e.route != "bucket" // a bucket's report has no journal
		}},
		{"writes: the output folder is the inputs' folder", func(t *testing.T, e *env) (outcome, bool) {
			switch e.route {
			case "bucket":
				e.output = e.input
			case "folder":
				e.output = e.in
			default:
				e.output = filepath.Join(e.in, "sub")
			}
			return outcome{bad: true}, true
		}},
		{"writes: the report is an input", func(t *testing.T, e *env) (outcome, bool) {
			e.report = filepath.Join(e.in, "y.png")
			if e.route == "file" {
				e.report = e.input
			}
			return outcome{bad: true}, true
		}},
		{"one run: another run holds the output folder", func(t *testing.T, e *env) (outcome, bool) {
			lock, err := folderrun.LockFolder(e.out)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(lock.Unlock)
			return outcome{fail: true, want: "is writing into"}, true
		}},
		{"hangs: the lock note is a FIFO", func(t *testing.T, e *env) (outcome, bool) {
			mkfifo(t, filepath.Join(e.out, folderrun.RunInfoName))
			return outcome{}, e.route != "bucket"
		}},
		{"hangs: the journal is a FIFO", func(t *testing.T, e *env) (outcome, bool) {
			mkfifo(t, folderrun.JournalPath(e.reportPath()))
			e.resume = true
			return outcome{fail: true, want: "not a regular file"}, e.route != "bucket"
		}},
		{"hangs: an input is a FIFO", func(t *testing.T, e *env) (outcome, bool) {
			mkfifo(t, filepath.Join(e.in, "z.png"))
			switch e.route {
			case "file":
				e.input = filepath.Join(e.in, "z.png")
				return outcome{bad: true}, true
			case "stdin":
				e.stdin += filepath.Join(e.in, "z.png") + "\n"
			}
			return outcome{failed: 1}, true
		}},
		{"hangs: an array input is a FIFO", func(t *testing.T, e *env) (outcome, bool) {
			mkfifo(t, filepath.Join(e.in, "z.npy"))
			e.spec = "load | sum"
			switch e.route {
			case "file":
				e.input = filepath.Join(e.in, "z.npy")
				return outcome{bad: true}, true
			case "stdin":
				e.stdin = filepath.Join(e.in, "z.npy") + "\n"
			}
			return outcome{failed: 1}, true
		}},
		{"hangs: an input is a link to a device", func(t *testing.T, e *env) (outcome, bool) {
			symlink(t, "/dev/zero", filepath.Join(e.in, "z.png"))
			switch e.route {
			case "file":
				e.input = filepath.Join(e.in, "z.png")
				return outcome{bad: true}, true
			case "stdin":
				e.stdin += filepath.Join(e.in, "z.png") + "\n"
			}
			return outcome{failed: 1}, true
		}},
		{"budgets: an image header claims a huge image", func(t *testing.T, e *env) (outcome, bool) {
			return e.hostileInput(t, "z.png", hugePNG(t, 60000, 60000), ""), true
		}},
		{"budgets: an array header claims more than its file holds", func(t *testing.T, e *env) (outcome, bool) {
			var b bytes.Buffer
			if err := npy.WriteHeader(&b, npy.Header{Descr: "<f4", Shape: []int{1 << 14, 1 << 14}}); err != nil {
				t.Fatal(err)
			}
			b.Write(make([]byte, 64))
			return e.hostileInput(t, "z.npy", b.Bytes(), "load max_elements=300000000 | sum"), true
		}},
		{"resume: a crafted and a truncated line in the previous report", func(t *testing.T, e *env) (outcome, bool) {
			plan, err := pipeline.CompileSpec(e.spec)
			if err != nil {
				t.Fatal(err)
			}
			// Done by this chain, its output there, but from another file (its size): redone.
			crafted := fmt.Sprintf(`{"input":%q,"output":%q,"status":"ok","pipeline":%q,"size":1,"mtime_ns":1}`, e.outName(), e.outName(), plan.String())
			truncated := `{"input":"y.png","output":"y.png","status":"o`
			if err := os.WriteFile(filepath.Join(e.out, folderrun.ReportName), []byte(crafted+"\n"+truncated), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := writePNGs(filepath.Join(e.out, filepath.Dir(e.outName())), filepath.Base(e.outName())); err != nil {
				t.Fatal(err)
			}
			e.resume = true
			return outcome{}, true
		}},
		{"hangs: stdin never ends", func(t *testing.T, e *env) (outcome, bool) {
			e.stdin = ""
			return outcome{bad: true, want: "more than"}, e.route == "stdin"
		}},
	}
	for _, tt := range tests {
		t.Run(tt.rule, func(t *testing.T) {
			for _, route := range routes {
				e := newEnv(t, route)
				o, applies := tt.setup(t, e)
				if !applies {
					continue
				}
				sum, err := e.run()
				o.check(t, route, sum, err)
				e.checkInputs()
			}
		})
	}
}

// A run that cannot write into its output folder at all stops before any work, on every
// route that writes one, with the reason; the previous report stays.
func TestReadOnlyOutputStopsBeforeWork(t *testing.T) {
	for _, route := range routes {
		e := newEnv(t, route)
		e.out = readOnlyFolder(t)
		e.output = e.out
		if route == "bucket" {
			e.output = "file://" + filepath.ToSlash(e.out)
		}
		e.report = filepath.Join(e.root, "r.jsonl")
		if err := os.WriteFile(e.report, []byte("previous\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		sum, err := e.run()
		outcome{fail: true, want: "cannot write"}.check(t, route, sum, err)
		if sum.Total() != 0 {
			t.Errorf("%s: %d inputs done", route, sum.Total())
		}
		if b, _ := os.ReadFile(e.report); string(b) != "previous\n" {
			t.Errorf("%s: the previous report is now %q", route, b)
		}
	}
}

// readOnlyFolder is an empty folder no one can write into: a folder of mode 0555, or,
// for root, who writes there anyway, a tmpfs mounted read-only; the test is skipped where
// neither can be had.
func readOnlyFolder(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o555); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(dir, 0o755) })
	f, err := os.CreateTemp(dir, "probe")
	if err != nil {
		return dir
	}
	f.Close()
	os.Remove(f.Name())
	if err := syscall.Mount("tmpfs", dir, "tmpfs", syscall.MS_RDONLY, "size=64k"); err != nil {
		t.Skipf("this user writes into read-only folders and may not mount one: %v", err)
	}
	t.Cleanup(func() { syscall.Unmount(dir, 0) })
	return dir
}
