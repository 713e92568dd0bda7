package main

import (
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/imgpipe/imgpipe/cudastage/sched/schedtest"

	"github.com/imgpipe/imgpipe/pipeline/folderrun"
)

// readFile returns a file's content, or "<missing>".
func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		return "<missing>"
	}
	return string(b)
}

// Where the output folder lies against the input folder decides whether inputs are safe.
func TestRunFolderNesting(t *testing.T) {
	rng := rand.New(rand.NewSource(11))
	img := pngBytes(t, photo(rng, 6, 5))
	tests := []struct {
		name  string
		setup func(t *testing.T, root string) (in, out string, args []string)
		code  int
		want  string
		// keep: files (relative to root) whose content must be what setup wrote.
		keep []string
	}{
		{"input inside output", func(t *testing.T, root string) (string, string, []string) {
			write(t, root, "o/in/a.png", img)
			return filepath.Join(root, "o/in"), filepath.Join(root, "o"), nil
		}, exitUsage, "lies inside the output folder", []string{"o/in/a.png"}},
		{"input inside output, spelled differently", func(t *testing.T, root string) (string, string, []string) {
			write(t, root, "o/in/a.png", img)
			if err := os.Symlink(filepath.Join(root, "o"), filepath.Join(root, "link")); err != nil {
				t.Fatal(err)
			}
			return filepath.Join(root, "o/in"), filepath.Join(root, "link") + "/", nil
		}, exitUsage, "lies inside the output folder", []string{"o/in/a.png"}},
		{"input inside output through a link", func(t *testing.T, root string) (string, string, []string) {
			write(t, root, "o/in/a.png", img)
			if err := os.Symlink(filepath.Join(root, "o/in"), filepath.Join(root, "inlink")); err != nil {
				t.Fatal(err)
			}
			return filepath.Join(root, "inlink"), filepath.Join(root, "o"), nil
		}, exitUsage, "lies inside the output folder", []string{"o/in/a.png"}},
		{"output inside input holding the user's images", func(t *testing.T, root string) (string, string, []string) {
			write(t, root, "in/a.png", img)
			write(t, root, "in/night/a.png", []byte("the user's own"))
			return filepath.Join(root, "in"), filepath.Join(root, "in/night"), nil
		}, exitUsage, "already holds files but no imgpipe-report.jsonl", []string{"in/night/a.png", "in/a.png"}},
		{"output inside input, new", func(t *testing.T, root string) (string, string, []string) {
			write(t, root, "in/a.png", img)
			return filepath.Join(root, "in"), filepath.Join(root, "in/night"), nil
		}, 0, "", []string{"in/a.png"}},
		{"output inside input, empty", func(t *testing.T, root string) (string, string, []string) {
			write(t, root, "in/a.png", img)
			if err := os.Mkdir(filepath.Join(root, "in/night"), 0o755); err != nil {
				t.Fatal(err)
			}
			return filepath.Join(root, "in"), filepath.Join(root, "in/night"), nil
		}, 0, "", []string{"in/a.png"}},
		{"output inside input, made by imgpipe", func(t *testing.T, root string) (string, string, []string) {
			write(t, root, "in/a.png", img)
			write(t, root, "in/night/a.png", []byte("an earlier output"))
			write(t, root, "in/night/"+folderrun.ReportName, []byte("{}\n"))
			return filepath.Join(root, "in"), filepath.Join(root, "in/night"), nil
		}, 0, "", []string{"in/a.png"}},
		{"output beside input", func(t *testing.T, root string) (string, string, []string) {
			write(t, root, "in/a.png", img)
			write(t, root, "input/x.png", img) // "in" is a prefix of "input", not a parent
			return filepath.Join(root, "input"), filepath.Join(root, "in"), []string{"--report", filepath.Join(root, "r.jsonl")}
		}, 0, "", []string{"in/a.png"}},
		{"output is a file", func(t *testing.T, root string) (string, string, []string) {
			write(t, root, "in/a.png", img)
			write(t, root, "out", []byte("x"))
			return filepath.Join(root, "in"), filepath.Join(root, "out"), nil
		}, exitUsage, "is not a folder", []string{"out"}},
		{"report is a folder", func(t *testing.T, root string) (string, string, []string) {
			write(t, root, "in/a.png", img)
			write(t, root, "out/"+folderrun.ReportName+"/x", []byte("x"))
			return filepath.Join(root, "in"), filepath.Join(root, "out"), nil
		}, exitUsage, "imgpipe-report.jsonl: exists and is a folder, not a regular file", []string{"out/" + folderrun.ReportName + "/x"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			in, out, extra := tt.setup(t, root)
			before := map[string]string{}
			for _, k := range tt.keep {
				before[k] = readFile(t, filepath.Join(root, k))
			}
			var outsBefore int
			if ents, err := os.ReadDir(out); err == nil {
				outsBefore = len(ents)
			}
			args := append([]string{"run", "-i", in, "-o", out, "-p", "decode | grayscale | save", "--device", "cpu", "-q"}, extra...)
			code, _, stderr := cli(t, args...)
			if code != tt.code || !strings.Contains(stderr, tt.want) {
				t.Fatalf("exit %d, want %d with %q\n%s", code, tt.code, tt.want, stderr)
			}
			for k, v := range before {
				if got := readFile(t, filepath.Join(root, k)); got != v {
					t.Errorf("%s changed", k)
				}
			}
			if code == exitUsage {
				// Nothing was written.
				if ents, _ := os.ReadDir(out); len(ents) != outsBefore {
					t.Errorf("output folder has %d entries, had %d", len(ents), outsBefore)
				}
			}
		})
	}
}

// Leftovers of a killed run are removed before the run, and no user file with them.
func TestRunRemovesTemps(t *testing.T) {
	rng := rand.New(rand.NewSource(12))
	in := t.TempDir()
	write(t, in, "a.png", pngBytes(t, photo(rng, 6, 5)))
	for _, quiet := range []bool{false, true} {
		root := t.TempDir()
		out := filepath.Join(root, "out")
		report := filepath.Join(root, "rep", "r.jsonl")
		leftovers := []string{"out/.a.png.tmp123", "out/sub/.b.png.tmp4294967295", "rep/.r.jsonl.tmp77"}
		users := []string{"out/.keep.tmp", "out/.a.png.tmp1x", "out/b.png.tmp5", "rep/.other.jsonl.tmp5"}
		for _, p := range append(append([]string{}, leftovers...), users...) {
			write(t, root, p, []byte("x"))
		}
		args := []string{"run", "-i", in, "-o", out, "--report", report, "-p", "decode | save", "--device", "cpu"}
		if quiet {
			args = append(args, "-q")
		}
		code, _, stderr := cli(t, args...)
		if code != 0 {
			t.Fatalf("exit %d\n%s", code, stderr)
		}
		if msg := "removed 3 temporary files a previous run left"; strings.Contains(stderr, msg) == quiet {
			t.Errorf("quiet %v, stderr:\n%s", quiet, stderr)
		}
		for _, p := range leftovers {
			if _, err := os.Stat(filepath.Join(root, p)); err == nil {
				t.Errorf("%s left", p)
			}
		}
		for _, p := range users {
			if _, err := os.Stat(filepath.Join(root, p)); err != nil {
				t.Errorf("user file %s: %v", p, err)
			}
		}
		if _, err := os.Stat(filepath.Join(out, "a.png")); err != nil {
			t.Error(err)
		}
	}
}

// A run that fails before any input is done leaves the previous report as it was: a bad
// GPU setting is a usage error found before anything is written, and a failure to start
// the device is fatal but keeps the report.
func TestRunEarlyFailureKeepsReport(t *testing.T) {
	rng := rand.New(rand.NewSource(13))
	in := t.TempDir()
	write(t, in, "a.png", pngBytes(t, photo(rng, 64, 48)))
	tests := []struct {
		name string
		fake schedtest.FakeConfig
		args []string
		code int
		want string
	}{
		{"slots do not fit the pinned budget", schedtest.FakeConfig{Name: "fake GPU"},
			[]string{"--batch", "4096", "--streams", "64", "--pinned-mb", "1"}, exitUsage, "too small for 66 slots of batch 4096"},
		{"device out of memory", schedtest.FakeConfig{Name: "fake GPU", MaxDeviceBytes: 1 << 10},
			nil, exitFatal, "out of memory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fakeDevice(t, tt.fake)
			out := t.TempDir()
			report := filepath.Join(out, folderrun.ReportName)
			const previous = "{\"input\":\"a.png\",\"output\":\"a.png\",\"status\":\"ok\"}\n{\"summary\":{}}\n"
			write(t, out, folderrun.ReportName, []byte(previous))
			args := append([]string{"run", "-i", in, "-o", out, "-p", "decode | grayscale | histogram | save", "--device", "cuda"}, tt.args...)
			code, _, stderr := cli(t, args...)
			if code != tt.code || !strings.Contains(stderr, tt.want) {
				t.Fatalf("exit %d, want %d with %q\n%s", code, tt.code, tt.want, stderr)
			}
			if got := readFile(t, report); got != previous {
				t.Errorf("report replaced by %q", got)
			}
			if ents, _ := os.ReadDir(out); len(ents) != 1 {
				t.Errorf("output folder holds %d entries", len(ents))
			}
		})
	}
}
