package pipeline

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/imgpipe/imgpipe/stages"
	"github.com/imgpipe/imgpipe/stages/stagestest"
)

// writeFiles creates files (slash paths) under dir with the given contents.
func writeFiles(t *testing.T, dir string, files map[string][]byte) {
	t.Helper()
	for name, data := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func listAll(t *testing.T, src Source) []Input {
	t.Helper()
	var out []Input
	for {
		in, err := src.Next(context.Background())
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, in)
	}
}

func TestFolderSource(t *testing.T) {
	dir := t.TempDir()
	x := []byte("x")
	writeFiles(t, dir, map[string][]byte{
		"b.jpg": x, "a.PNG": x, "c.txt": x, "noext": x, "d.JPEG": x, "e.tif": x, "f.TIFF": x,
		"g.gif": x, "h.bmp": x, "i.webp": x, "j.jpg.bak": x, ".hidden.png": x,
		"sub/z.png": x, "sub/deeper/y.jpg": x, "a-b.png": x, "sub-a/k.png": x,
		// Stems shared within one folder: every one keeps its extension.
		"clash/p.jpg": x, "clash/p.png": x, "clash/P.JPG": x, "clash/q.png": x,
		// A name the clash rule cannot separate: r.png and r.png.jpg both give r.png.*.
		"clash2/r.png": x, "clash2/r.jpg": x, "clash2/r.png.jpg": x,
		"out/o.png": x, // the output folder, inside the input folder
	})
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo.png"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(dir, "b.jpg"), filepath.Join(dir, "link.jpg")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(dir, "sub"), filepath.Join(dir, "linkdir")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(dir, "missing.png"), filepath.Join(dir, "dangling.png")); err != nil {
		t.Fatal(err)
	}
	// Entries named as images that are not regular files are reported, never read.
	if err := os.Symlink("loop2.png", filepath.Join(dir, "loop1.png")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("loop1.png", filepath.Join(dir, "loop2.png")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("sub", filepath.Join(dir, "dirlink.png")); err != nil {
		t.Fatal(err)
	}
	got := listAll(t, Folder(dir, filepath.Join(dir, "out")))
	want := []struct{ name, stem, err string }{
		{".hidden.png", ".hidden", ""},
		{"a-b.png", "a-b", ""},
		{"a.PNG", "a", ""},
		{"b.jpg", "b", ""},
		{"clash/P.JPG", "clash/P.JPG", ""},
		{"clash/p.jpg", "clash/p.jpg", ""},
		{"clash/p.png", "clash/p.png", ""},
		{"clash/q.png", "clash/q", ""},
		{"clash2/r.jpg", "clash2/r.jpg", ""},
		{"clash2/r.png", "clash2/r.png", ""},
		{"clash2/r.png.jpg", "clash2/r.png", "save: output name clash2/r.png.* is already that of clash2/r.png"},
		{"d.JPEG", "d", ""},
		{"dangling.png", "", "walk: broken symbolic link"},
		{"dirlink.png", "", "walk: symbolic link to a folder"},
		{"e.tif", "e", ""},
		{"f.TIFF", "f", ""},
		{"fifo.png", "", "walk: not a regular file (a named pipe)"},
		{"g.gif", "g", ""},
		{"h.bmp", "h", ""},
		{"i.webp", "i", ""},
		{"link.jpg", "link", ""},
		{"loop1.png", "", "walk: symbolic link loop"},
		{"loop2.png", "", "walk: symbolic link loop"},
		{"sub/deeper/y.jpg", "sub/deeper/y", ""},
		{"sub/z.png", "sub/z", ""},
		{"sub-a/k.png", "sub-a/k", ""},
	}
	if len(got) != len(want) {
		var names []string
		for _, in := range got {
			names = append(names, in.Name)
		}
		t.Fatalf("got %d inputs %v, want %d", len(got), names, len(want))
	}
	var names []string
	for i, w := range want {
		in := got[i]
		names = append(names, in.Name)
		errText := ""
		if in.Err != nil {
			errText = in.Err.Error()
		}
		if in.Name != w.name || in.OutStem != w.stem || !strings.HasPrefix(errText, w.err) || (w.err == "") != (in.Err == nil) {
			t.Errorf("input %d = {%s %s %v}, want %+v", i, in.Name, in.OutStem, in.Err, w)
		}
		if in.Err == nil && in.Path != filepath.Join(dir, filepath.FromSlash(in.Name)) {
			t.Errorf("input %d path %s", i, in.Path)
		}
	}
	// walkLess, which Resume relies on, agrees with the walk order.
	if !sort.SliceIsSorted(names, func(i, j int) bool { return walkLess(names[i], names[j]) }) {
		t.Errorf("walk order is not walkLess order: %v", names)
	}
}

func TestFolderSourceErrors(t *testing.T) {
	if _, err := Folder(filepath.Join(t.TempDir(), "missing")).Next(context.Background()); err == nil || !strings.Contains(err.Error(), "input folder") {
		t.Errorf("missing folder: %v", err)
	}
	f := filepath.Join(t.TempDir(), "file")
	writeFiles(t, filepath.Dir(f), map[string][]byte{"file": nil})
	if _, err := Folder(f).Next(context.Background()); err == nil || !strings.Contains(err.Error(), "not a folder") {
		t.Errorf("file as folder: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	dir := t.TempDir()
	writeFiles(t, dir, map[string][]byte{"a.png": nil})
	if _, err := Folder(dir).Next(ctx); err == nil {
		t.Error("cancelled walk went on")
	}
	if os.Geteuid() != 0 { // root reads anything
		writeFiles(t, dir, map[string][]byte{"locked/b.png": nil, "c.png": nil})
		if err := os.Chmod(filepath.Join(dir, "locked"), 0); err != nil {
			t.Fatal(err)
		}
		defer os.Chmod(filepath.Join(dir, "locked"), 0o755)
		got := listAll(t, Folder(dir))
		if len(got) != 3 || got[2].Name != "locked/" || got[2].Err == nil || !strings.Contains(got[2].Err.Error(), "list: open: permission denied") {
			t.Errorf("unreadable subfolder: %+v", got)
		}
	}
}

func TestWalkLess(t *testing.T) {
	tests := []struct {
		a, b string
		want bool
	}{
		{"a", "b", true}, {"b", "a", false}, {"a", "a", false},
		{"a/x", "a-b", true}, // the folder "a" sorts before the file "a-b", as the walk does
		{"a-b", "a/x", false},
		{"a/b/c", "a/b/d", true}, {"a/b", "a/b/c", true}, {"a/b/c", "a/b", false},
		{"Z", "a", true},
	}
	for _, tt := range tests {
		if got := walkLess(tt.a, tt.b); got != tt.want {
			t.Errorf("walkLess(%q, %q) = %v", tt.a, tt.b, got)
		}
	}
}

func makeFolder(t *testing.T, n int) (string, map[string][]byte) {
	t.Helper()
	rng := rand.New(rand.NewSource(9))
	dir := t.TempDir()
	files := map[string][]byte{}
	for i := 0; i < n; i++ {
		name := []string{"a", "b/c", "b/d/e"}[i%3] + "/img" + string(rune('a'+i)) + []string{".png", ".jpg"}[i%2]
		format := "png"
		if strings.HasSuffix(name, ".jpg") {
			format = "jpeg"
		}
		files[name] = stagestest.Encode(t, stagestest.ReadImage(rng, 10+i, 7+i, 3), format)
	}
	files["bad.jpg"] = []byte("not really")
	writeFiles(t, dir, files)
	return dir, files
}

func TestRunFolderToFolder(t *testing.T) {
	in, files := makeFolder(t, 9)
	out := filepath.Join(in, "out") // inside the input folder: must not be walked
	plan := compileWith(t, Builtin, "decode | grayscale | transpose | histogram | save")
	for round := 0; round < 2; round++ {
		var report bytes.Buffer
		sum, err := Run(context.Background(), plan, Folder(in, out), ToFolder(out), Options{Workers: 3, Report: &report})
		if err != nil {
			t.Fatal(err)
		}
		if sum.OK != len(files)-1 || sum.Failed != 1 {
			t.Fatalf("round %d: summary %+v", round, sum)
		}
	}
	for name := range files {
		if name == "bad.jpg" {
			continue
		}
		p := filepath.Join(out, filepath.FromSlash(strings.TrimSuffix(name, filepath.Ext(name))+".png"))
		if _, err := os.Stat(p); err != nil {
			t.Errorf("output of %s: %v", name, err)
		}
	}
	// Nothing else: no temporary file, no output for the bad input.
	n := 0
	filepath.WalkDir(out, func(p string, d os.DirEntry, err error) error {
		if !d.IsDir() {
			n++
			if !strings.HasSuffix(p, ".png") {
				t.Errorf("stray file %s", p)
			}
		}
		return nil
	})
	if n != len(files)-1 {
		t.Errorf("%d files in the output folder", n)
	}
}

func TestResume(t *testing.T) {
	in, files := makeFolder(t, 7)
	out := t.TempDir()
	plan := compileWith(t, Builtin, "decode | blur sigma=1 | histogram | save")
	run := func(prev []byte, plan *Plan) (Summary, string) {
		var src Source = Folder(in, out)
		if prev != nil {
			src = Resume(src, plan, out, bytes.NewReader(prev))
		}
		var report bytes.Buffer
		sum, err := Run(context.Background(), plan, src, ToFolder(out), Options{Workers: 2, Report: &report})
		if err != nil {
			t.Fatal(err)
		}
		return sum, report.String()
	}
	sum, first := run(nil, plan)
	if sum.OK != len(files)-1 {
		t.Fatalf("first run: %+v", sum)
	}
	stamp := map[string]time.Time{}
	filepath.WalkDir(out, func(p string, d os.DirEntry, err error) error {
		if fi, err := d.Info(); err == nil && !d.IsDir() {
			stamp[p] = fi.ModTime()
		}
		return nil
	})

	// Everything done before is skipped, with its dimensions and histogram kept; only the
	// failed input is tried again. Nothing is rewritten.
	sum, second := run([]byte(first), plan)
	if sum.Skipped != len(files)-1 || sum.Failed != 1 || sum.OK != 0 {
		t.Fatalf("resumed run: %+v", sum)
	}
	l1, l2 := reportLines(t, first), reportLines(t, second)
	for i := range l1[:len(l1)-1] {
		want := strings.Replace(l1[i], `"status":"ok"`, `"status":"skipped"`, 1)
		if l2[i] != want {
			t.Errorf("line %d:\n got %s\nwant %s", i, l2[i], want)
		}
	}
	filepath.WalkDir(out, func(p string, d os.DirEntry, err error) error {
		if fi, err := d.Info(); err == nil && !d.IsDir() && !fi.ModTime().Equal(stamp[p]) {
			t.Errorf("%s rewritten", p)
		}
		return nil
	})

	// A resumed report resumes too; a missing output is redone.
	if err := os.Remove(filepath.Join(out, "a", "imga.png")); err != nil {
		t.Fatal(err)
	}
	sum, _ = run([]byte(second), plan)
	if sum.OK != 1 || sum.Skipped != len(files)-2 {
		t.Errorf("after removing one output: %+v", sum)
	}
	// Another format means other output names: everything is redone.
	sum, _ = run([]byte(first), compileWith(t, Builtin, "decode | blur sigma=1 | histogram | save format=jpeg"))
	if sum.OK != len(files)-1 {
		t.Errorf("other format: %+v", sum)
	}
	// A report that is not one (or is out of order) only means more work.
	sum, _ = run([]byte("garbage\n{\"summary\":{}}\n"+l1[3]+"\n"+l1[0]+"\n"), plan)
	if sum.Skipped != 1 {
		t.Errorf("odd report: %+v", sum)
	}
}

// ToFolder's outputs are committed in groups by the runner: every output is in place by the
// time its input is reported, a commit that fails (a folder holds the output's name) fails
// only that input, in the save stage, and no temporary file is left.
func TestRunFolderCommits(t *testing.T) {
	in, files := makeFolder(t, 12)
	out := t.TempDir()
	blocked := filepath.Join(out, "a", "imga.png")
	if err := os.MkdirAll(filepath.Join(blocked, "x"), 0o755); err != nil {
		t.Fatal(err)
	}
	plan := compileWith(t, Builtin, "decode | grayscale | save")
	var missing []string
	progress := func(r *Result) {
		if r.Status != StatusOK {
			return
		}
		if _, err := os.Stat(filepath.Join(out, filepath.FromSlash(r.Output))); err != nil {
			missing = append(missing, r.Output)
		}
	}
	sum, err := Run(context.Background(), plan, Folder(in, out), ToFolder(out), Options{Workers: 4, Progress: progress})
	if err != nil {
		t.Fatal(err)
	}
	if sum.OK != len(files)-2 || sum.Failed != 2 { // bad.jpg, and the blocked output
		t.Errorf("summary %+v, want %d ok and 2 failed", sum, len(files)-2)
	}
	if len(missing) > 0 {
		t.Errorf("reported before their output was in place: %v", missing)
	}
	if n, err := stages.RemoveTemps(out); n != 0 || err != nil {
		t.Errorf("%d temporary files left (%v)", n, err)
	}
	var report bytes.Buffer
	Run(context.Background(), plan, Folder(in, out), ToFolder(out), Options{Workers: 2, Report: &report})
	if !strings.Contains(report.String(), `"input":"a/imga.png","status":"failed"`) ||
		!regexp.MustCompile(`"input":"a/imga.png"[^\n]*"error":"save: `).MatchString(report.String()) {
		t.Errorf("the blocked output's line does not fail it in save:\n%s", report.String())
	}
}

// TestRunSlowInputHoldsNoWorker: while one input is stuck, the others are processed and
// staged far past the window, and everything is reported in input order once it is
// released.
func TestRunSlowInputHoldsNoWorker(t *testing.T) {
	rng := rand.New(rand.NewSource(3))
	const n = 20 // ten times the window, within ReorderSpan windows
	release, last := make(chan struct{}), make(chan struct{})
	data := stagestest.Encode(t, stagestest.ReadImage(rng, 9, 5, 3), "png")
	opener := func(gate, signal chan struct{}) func(context.Context) (io.ReadCloser, int64, error) {
		return func(context.Context) (io.ReadCloser, int64, error) {
			if gate != nil {
				<-gate
			}
			if signal != nil {
				close(signal)
			}
			return io.NopCloser(bytes.NewReader(data)), int64(len(data)), nil
		}
	}
	var ins []Input
	for i := range n {
		in := Input{Name: fmt.Sprintf("img%02d.png", i)}
		switch i {
		case 0:
			in.Open = opener(release, nil)
		case n - 1:
			in.Open = opener(nil, last)
		default:
			in.Data = data
		}
		ins = append(ins, in)
	}
	out := t.TempDir()
	var report bytes.Buffer
	done := make(chan error, 1)
	go func() {
		_, err := Run(context.Background(), compileWith(t, Builtin, "decode | grayscale | save"), Inputs(ins...), ToFolder(out),
			Options{Workers: 2, Window: 2, Report: &report})
		done <- err
	}()
	select {
	case <-last:
	case <-time.After(30 * time.Second):
		t.Fatal("the last input was never started while the first one was stuck")
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	lines := reportLines(t, report.String())
	if len(lines) != n+1 {
		t.Fatalf("%d report lines, want %d", len(lines), n+1)
	}
	for i, l := range lines[:n] {
		if !strings.Contains(l, fmt.Sprintf(`"input":"img%02d.png"`, i)) || !strings.Contains(l, `"status":"ok"`) {
			t.Errorf("line %d: %s", i, l)
		}
	}
	if n, err := stages.RemoveTemps(out); n != 0 || err != nil {
		t.Errorf("%d temporary files left (%v)", n, err)
	}
}
