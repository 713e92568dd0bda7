package folderrun

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// shardReport is a finished report of inputs names, all ok.
func shardReport(names ...string) string {
	var b strings.Builder
	for _, n := range names {
		b.WriteString(`{"input":"` + n + `","status":"ok","pipeline":"decode | save"}` + "\n")
	}
	b.WriteString(`{"summary":{"pipeline":"decode | save","ok":` + string(rune('0'+len(names))) + `}}` + "\n")
	return b.String()
}

// MergeReports takes only whole, regular, disjoint reports, never hangs on a special file,
// and never writes its result onto one of them or through a link: each bad case is a
// bad request, with the output left as it was.
func TestMergeReportsHostile(t *testing.T) {
	tests := []struct {
		name  string
		setup func(t *testing.T, dir string) (names []string, out string)
		want  string
	}{
		{"a report is a FIFO", func(t *testing.T, dir string) ([]string, string) {
			p := filepath.Join(dir, "fifo.jsonl")
			if err := syscall.Mkfifo(p, 0o644); err != nil {
				t.Fatal(err)
			}
			return []string{filepath.Join(dir, "a.jsonl"), p}, ""
		}, "not a regular file"},
		{"a report is a device", func(t *testing.T, dir string) ([]string, string) {
			return []string{"/dev/zero"}, ""
		}, "not a regular file"},
		{"a report is a folder", func(t *testing.T, dir string) ([]string, string) {
			return []string{dir}, ""
		}, "not a regular file"},
		{"the output is a report merged", func(t *testing.T, dir string) ([]string, string) {
			a := filepath.Join(dir, "a.jsonl")
			return []string{a, filepath.Join(dir, "b.jsonl")}, a
		}, "is the report"},
		{"the output is a link", func(t *testing.T, dir string) ([]string, string) {
			link := filepath.Join(dir, "link.jsonl")
			if err := os.Symlink(filepath.Join(dir, "c.jsonl"), link); err != nil {
				t.Fatal(err)
			}
			return []string{filepath.Join(dir, "a.jsonl"), filepath.Join(dir, "b.jsonl")}, link
		}, "symbolic link"},
		{"the output is a FIFO", func(t *testing.T, dir string) ([]string, string) {
			p := filepath.Join(dir, "out.fifo")
			if err := syscall.Mkfifo(p, 0o644); err != nil {
				t.Fatal(err)
			}
			return []string{filepath.Join(dir, "a.jsonl")}, p
		}, "named pipe"},
		{"a report merged twice", func(t *testing.T, dir string) ([]string, string) {
			a := filepath.Join(dir, "a.jsonl")
			return []string{a, a}, ""
		}, "is also in"},
		{"truncated: no summary", func(t *testing.T, dir string) ([]string, string) {
			return []string{writeReport(t, dir, "t.jsonl", strings.SplitAfter(shardReport("x.png"), "\n")[0])}, ""
		}, "no summary line"},
		{"cut in the middle of a line", func(t *testing.T, dir string) ([]string, string) {
			s := shardReport("x.png", "y.png")
			return []string{writeReport(t, dir, "t.jsonl", s[:len(s)-10])}, ""
		}, "line 3"},
		{"an input twice in one report", func(t *testing.T, dir string) ([]string, string) {
			return []string{writeReport(t, dir, "d.jsonl", shardReport("x.png", "x.png"))}, ""
		}, "is also in"},
		{"a line after the summary", func(t *testing.T, dir string) ([]string, string) {
			return []string{writeReport(t, dir, "s.jsonl", shardReport("x.png")+shardReport("y.png"))}, ""
		}, "after the summary"},
		{"a crafted status", func(t *testing.T, dir string) ([]string, string) {
			s := strings.Replace(shardReport("x.png"), `"ok"`, `"done"`, 1)
			return []string{writeReport(t, dir, "c.jsonl", s)}, ""
		}, `status "done"`},
		{"a line over the limit", func(t *testing.T, dir string) ([]string, string) {
			s := `{"input":"` + strings.Repeat("x", 2<<20) + `","status":"ok"}` + "\n"
			return []string{writeReport(t, dir, "l.jsonl", s)}, ""
		}, "too long"},
		{"another chain", func(t *testing.T, dir string) ([]string, string) {
			s := strings.ReplaceAll(shardReport("z.png"), "decode | save", "decode | grayscale | save")
			return []string{filepath.Join(dir, "a.jsonl"), writeReport(t, dir, "o.jsonl", s)}, ""
		}, "is not"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			writeReport(t, dir, "a.jsonl", shardReport("x.png"))
			writeReport(t, dir, "b.jsonl", shardReport("y.png"))
			names, out := tt.setup(t, dir)
			var before []byte
			if fi, err := os.Lstat(out); out != "" && err == nil && fi.Mode().IsRegular() {
				before, _ = os.ReadFile(out)
			}
			var stdout bytes.Buffer
			done := make(chan error, 1)
			go func() { done <- MergeReports(names, out, &stdout) }()
			err := watch(t, done)
			var bad *RequestError
			if !errors.As(err, &bad) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("%T %v, want a bad request with %q", err, err, tt.want)
			}
			if stdout.Len() > 0 {
				t.Errorf("wrote %q", stdout.String())
			}
			if fi, err := os.Lstat(out); out != "" && err == nil && fi.Mode().IsRegular() {
				if after, _ := os.ReadFile(out); !bytes.Equal(after, before) {
					t.Errorf("the output %s was changed", out)
				}
			}
		})
	}
}

// Two shards merge into one report, to a file or to stdout.
func TestMergeReports(t *testing.T) {
	dir := t.TempDir()
	a := writeReport(t, dir, "a.jsonl", shardReport("x.png"))
	b := writeReport(t, dir, "b.jsonl", shardReport("y.png"))
	var stdout bytes.Buffer
	if err := MergeReports([]string{b, a}, "", &stdout); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "m.jsonl")
	if err := MergeReports([]string{b, a}, out, nil); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(out)
	if err != nil || !bytes.Equal(got, stdout.Bytes()) || !strings.Contains(string(got), `"ok":2`) {
		t.Errorf("merged %q (%v), on stdout %q", got, err, stdout.String())
	}
}

func writeReport(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// watch waits for a call's result; should it hang, the test fails instead of the binary
// sticking (a watchdog: a pass never waits on it).
func watch(t *testing.T, done <-chan error) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(time.Minute):
		t.Fatal("hangs")
	}
	return nil
}
