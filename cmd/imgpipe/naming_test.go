package main

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/imgpipe/imgpipe/pipeline"
)

// TestOutputNaming: -o FILE for one input, --name templates with the clash rule kept, and
// --report none.
func TestOutputNaming(t *testing.T) {
	in := selectionFolder(t)
	write(t, in, "raw/c.jpg", readFileBytes(t, filepath.Join(in, "b.jpg"))) // clashes with raw/c.png
	one := filepath.Join(in, "a.png")
	for _, tc := range []struct {
		name   string
		args   []string // OUT is replaced by a new folder
		code   int
		want   []string // files under OUT
		stderr string
	}{
		{"one file to a named file", []string{"-i", one, "-o", "OUT/thumb.jpg", "-p", "decode | resize width=4 | save format=jpeg"}, exitOK,
			[]string{"imgpipe-report.jsonl", "thumb.jpg"}, ""},
		{"named file, its report elsewhere", []string{"-i", one, "-o", "OUT/t.png", "-p", "decode | save", "--report", "OUT/r/r.jsonl"}, exitOK,
			[]string{"r/r.jsonl", "t.png"}, ""},
		{"named file, wrong extension", []string{"-i", one, "-o", "OUT/thumb.webp", "-p", "decode | save"}, exitUsage, nil,
			"-o OUT/thumb.webp names one output file, and the chain saves .png files: name it thumb.png"},
		{"named file and --name", []string{"-i", one, "-o", "OUT/t.png", "-p", "decode | save", "--name", "{stem}.{ext}"}, exitUsage, nil, "give one of them"},
		{"template", []string{"-i", in, "-o", "OUT", "-p", "decode | save", "--name", "{stem}_256.{ext}", "--exclude", "raw/c.jpg"}, exitOK,
			[]string{"a_256.png", "b_256.png", "imgpipe-report.jsonl", "raw/c_256.png", "raw/deep/d_256.png"}, ""},
		{"template keeps the clash rule", []string{"-i", in, "-o", "OUT", "-p", "decode | save format=jpeg", "--name", "t-{stem}.{ext}", "--include", "raw/*"}, exitOK,
			[]string{"imgpipe-report.jsonl", "raw/t-c.jpg.jpg", "raw/t-c.png.jpg"}, ""},
		{"template without {ext}", []string{"-i", in, "-o", "OUT", "-p", "decode | save", "--name", "{stem}.png"}, exitUsage, nil, "--name: name template \"{stem}.png\": end it with .{ext}"},
		{"template without {stem}", []string{"-i", in, "-o", "OUT", "-p", "decode | save", "--name", "x.{ext}"}, exitUsage, nil, "hold {stem} once"},
		{"template with a path", []string{"-i", in, "-o", "OUT", "-p", "decode | save", "--name", "s/{stem}.{ext}"}, exitUsage, nil, "a name, not a path"},
		{"template, unknown placeholder", []string{"-i", in, "-o", "OUT", "-p", "decode | save", "--name", "{dir}{stem}.{ext}"}, exitUsage, nil, "the placeholders are {stem} and {ext}"},
		{"report none", []string{"-i", one, "-o", "OUT", "-p", "decode | save", "--report", "none"}, exitOK, []string{"a.png"}, ""},
		{"report none, resume", []string{"-i", one, "-o", "OUT", "-p", "decode | save", "--report", "none", "--resume"}, exitUsage, nil,
			"--resume reads the previous report, which --report none does not write"},
		{"report none, nothing saved", []string{"-i", one, "-p", "decode | histogram", "--report", "none"}, exitUsage, nil, "would write nothing at all"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "out")
			args := []string{"run", "-q"}
			for _, a := range tc.args {
				args = append(args, strings.Replace(a, "OUT", out, 1))
			}
			code, _, stderr := cli(t, args...)
			if code != tc.code || !strings.Contains(stderr, strings.ReplaceAll(tc.stderr, "OUT", out)) {
				t.Fatalf("exit %d, stderr %q; want %d and %q", code, stderr, tc.code, tc.stderr)
			}
			var got []string
			filepath.WalkDir(out, func(p string, d os.DirEntry, err error) error {
				if err == nil && !d.IsDir() {
					rel, _ := filepath.Rel(out, p)
					got = append(got, filepath.ToSlash(rel))
				}
				return nil
			})
			sort.Strings(got)
			if strings.Join(got, " ") != strings.Join(tc.want, " ") {
				t.Errorf("wrote %q, want %q", got, tc.want)
			}
		})
	}
}

// TestNamedOutputTemps: a run to a named file removes what a killed run left of that file,
// and does not walk the folder that holds it.
func TestNamedOutputTemps(t *testing.T) {
	in := selectionFolder(t)
	out := t.TempDir()
	write(t, out, ".t.png.tmp123", []byte("x"))
	write(t, out, "sub/.o.png.tmp7", []byte("x"))
	code, _, stderr := cli(t, "run", "-i", filepath.Join(in, "a.png"), "-o", filepath.Join(out, "t.png"), "-p", "decode | save")
	if code != exitOK || !strings.Contains(stderr, "removed 1 temporary files") {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if _, err := os.Stat(filepath.Join(out, "sub/.o.png.tmp7")); err != nil {
		t.Errorf("another folder's temporary file: %v", err)
	}
}

// TestSummaryFromOneFunction: a merged summary (wait's) gets its megapixels per second
// as its report does, so that the line and the report agree.
func TestSummaryFromOneFunction(t *testing.T) {
	for _, tc := range []struct {
		sum  pipeline.Summary
		want string
	}{
		{pipeline.Summary{OK: 2, Megapixels: 32.2, Seconds: 2, Device: "cpu"}, "(16.1 MP/s)"},
		{pipeline.Summary{OK: 2, Megapixels: 32.2, Seconds: 2, MegapixelsPerSecond: 15, Device: "cpu"}, "(15.0 MP/s)"},
	} {
		var b strings.Builder
		printSummary(&b, "x: ", tc.sum)
		if !strings.HasPrefix(b.String(), "x: processed 2 images") || !strings.Contains(b.String(), tc.want) {
			t.Errorf("%+v: %q, want %q", tc.sum, b.String(), tc.want)
		}
	}
}

func readFileBytes(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
