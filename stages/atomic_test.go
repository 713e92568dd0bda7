package stages

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

func TestIsTempName(t *testing.T) {
	long := strings.Repeat("x", maxTempBase)
	tests := []struct {
		name string
		want bool
	}{
		{".a.png.tmp123", true},
		{".a.png.tmp0", true},
		{".a.png.tmp4294967295", true},
		{".imgpipe-report.jsonl.tmp98765", true},
		{"." + long + ".tmp1", true},
		{"..a.png.tmp7", true}, // the temp of "..a.png"
		{".x.tmp.tmp5", true},  // the temp of "x.tmp"
		{"." + long + "x.tmp1", false},
		{".a.png.tmp4294967296", false}, // over uint32
		{".a.png.tmp12345678901", false},
		{".a.png.tmp", false},
		{".a.png.tmp12a", false},
		{".a.png.tmp-1", false},
		{".tmp123", false}, // no base
		{"..tmp123", false},
		{"a.png.tmp123", false}, // no leading dot
		{".a.tmp", false},
		{".notes.tmp.bak", false},
		{"", false},
		{".", false},
	}
	for _, tt := range tests {
		if got := IsTempName(tt.name); got != tt.want {
			t.Errorf("IsTempName(%q) = %v, want %v", tt.name, got, tt.want)
		}
	}
}

// The names WriteFileAtomic really creates are recognised.
func TestIsTempNameMatchesWriteFileAtomic(t *testing.T) {
	dir := t.TempDir()
	for _, base := range []string{"a.png", "..b.jpg", strings.Repeat("y", 250) + ".png"} {
		var seen []string
		err := WriteFileAtomic(filepath.Join(dir, base), func(w io.Writer) error {
			ents, err := os.ReadDir(dir)
			for _, e := range ents {
				if strings.Contains(e.Name(), TempMarker) {
					seen = append(seen, e.Name())
				}
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(seen) != 1 || !IsTempName(seen[0]) {
			t.Errorf("%s: temporary files %q", base, seen)
		}
	}
}

func TestRemoveTemps(t *testing.T) {
	dir := t.TempDir()
	files := map[string]bool{ // name: is a leftover
		".a.png.tmp123":                 true,
		"sub/.b.png.tmp9":               true,
		"sub/deep/.c.jpg.tmp4000000000": true,
		".imgpipe-report.jsonl.tmp77":   true,
		"a.png":                         false,
		".a.tmp":                        false,
		"sub/.notes.tmp.bak":            false,
		"sub/b.png.tmp9":                false,
		".d.png.tmp12x":                 false,
	}
	for name := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// Only regular files go: not a folder or a link with a temporary file's name, nor what
	// a link points to.
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, ".e.png.tmp1"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, ".f.png.tmp5"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(outside, ".e.png.tmp1"), filepath.Join(dir, ".g.png.tmp6")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(dir, "linkdir")); err != nil {
		t.Fatal(err)
	}

	n, err := RemoveTemps(dir)
	if err != nil {
		t.Fatal(err)
	}
	var want, left []string
	for name, temp := range files {
		if temp {
			continue
		}
		want = append(want, name)
	}
	want = append(want, ".f.png.tmp5", ".g.png.tmp6", "linkdir", "sub", "sub/deep")
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if p != dir {
			rel, _ := filepath.Rel(dir, p)
			left = append(left, filepath.ToSlash(rel))
		}
		return err
	})
	sort.Strings(want)
	sort.Strings(left)
	if n != 4 || strings.Join(left, " ") != strings.Join(want, " ") {
		t.Errorf("removed %d, left %v\nwant 4, left %v", n, left, want)
	}
	if _, err := os.Stat(filepath.Join(outside, ".e.png.tmp1")); err != nil {
		t.Errorf("a file outside was touched: %v", err)
	}

	// A missing folder has nothing to clean; an unreadable path is an error.
	if n, err := RemoveTemps(filepath.Join(dir, "missing")); n != 0 || err != nil {
		t.Errorf("missing folder: %d, %v", n, err)
	}
	if _, err := RemoveTemps(filepath.Join(dir, "a.png", "x")); err == nil {
		t.Error("a path through a file: no error")
	}
}

func TestRemoveTempsOf(t *testing.T) {
	dir := t.TempDir()
	long := strings.Repeat("r", 230) + ".jsonl"
	files := map[string]bool{ // name: is a leftover of report.jsonl or of long
		".report.jsonl.tmp123":                 true,
		".report.jsonl.tmp4000000000":          true,
		"." + long[:200] + ".tmp7":             true,
		".other.jsonl.tmp5":                    false,
		"report.jsonl":                         false,
		".report.jsonl.tmp12x":                 false,
		".report.jsonl.tmp":                    false,
		".report.json.tmp3":                    false,
		"sub/.report.jsonl.tmp9":               false,
		".report.jsonl.tmp99999999999999999":   false,
		".report.jsonl.bak.tmp1.not-temporary": false,
	}
	for name := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, ".report.jsonl.tmp6"), 0o755); err != nil {
		t.Fatal(err)
	}
	n, err := RemoveTempsOf(filepath.Join(dir, "report.jsonl"))
	if err != nil || n != 2 {
		t.Errorf("RemoveTempsOf(report.jsonl) = %d, %v; want 2", n, err)
	}
	if n, err := RemoveTempsOf(filepath.Join(dir, long)); err != nil || n != 1 {
		t.Errorf("RemoveTempsOf(a long name) = %d, %v; want 1 (names keep 200 bytes of the base)", n, err)
	}
	for name, temp := range files {
		_, err := os.Stat(filepath.Join(dir, filepath.FromSlash(name)))
		if temp != os.IsNotExist(err) {
			t.Errorf("%s: leftover %v, but stat says %v", name, temp, err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, ".report.jsonl.tmp6")); err != nil {
		t.Errorf("a folder with a temporary name was removed: %v", err)
	}
	if n, err := RemoveTempsOf(filepath.Join(dir, "missing", "report.jsonl")); n != 0 || err != nil {
		t.Errorf("missing folder: %d, %v", n, err)
	}
	if n, err := RemoveTempsOf(dir + string(filepath.Separator)); n != 0 || err != nil {
		t.Errorf("a folder path: %d, %v", n, err)
	}
}

// WriteFileAtomicIn writes only inside its root: a folder on the way that is a link is
// refused (wherever it points) and what it points at is untouched; a link at the file's
// own name is replaced, not followed.
func TestWriteFileAtomicInRefusesLinks(t *testing.T) {
	tests := []struct {
		name    string
		setup   func(t *testing.T, out, victim string) // victim: a file outside out
		write   string
		wantErr string // "" for success
	}{
		{"plain nested", func(*testing.T, string, string) {}, "a/b/c.png", ""},
		{"link to a folder outside", func(t *testing.T, out, victim string) {
			must(t, os.Symlink(filepath.Dir(victim), filepath.Join(out, "a")))
		}, "a/victim.png", "a is a symbolic link"},
		{"link to a folder inside", func(t *testing.T, out, _ string) {
			must(t, os.Mkdir(filepath.Join(out, "real"), 0o755))
			must(t, os.Symlink("real", filepath.Join(out, "a")))
		}, "a/x.png", "a is a symbolic link"},
		{"deeper link", func(t *testing.T, out, victim string) {
			must(t, os.Mkdir(filepath.Join(out, "d"), 0o755))
			must(t, os.Symlink(filepath.Dir(victim), filepath.Join(out, "d", "e")))
		}, "d/e/victim.png", "d/e is a symbolic link"},
		{"file where a folder should be", func(t *testing.T, out, _ string) {
			must(t, os.WriteFile(filepath.Join(out, "f"), nil, 0o644))
		}, "f/x.png", "f is not a folder"},
		{"link at the name is replaced", func(t *testing.T, out, victim string) {
			must(t, os.Symlink(victim, filepath.Join(out, "victim.png")))
		}, "victim.png", ""},
		{"escaping name", func(*testing.T, string, string) {}, "../victim.png", "not a relative path"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			base := t.TempDir()
			out := filepath.Join(base, "out")
			must(t, os.Mkdir(out, 0o755))
			victim := filepath.Join(base, "in", "victim.png")
			must(t, os.MkdirAll(filepath.Dir(victim), 0o755))
			must(t, os.WriteFile(victim, []byte("input"), 0o644))
			tt.setup(t, out, victim)
			root, err := os.OpenRoot(out)
			must(t, err)
			defer root.Close()
			err = WriteFileAtomicIn(root, tt.write, func(w io.Writer) error {
				_, err := io.WriteString(w, "output")
				return err
			})
			if got, _ := os.ReadFile(victim); string(got) != "input" {
				t.Fatalf("the file outside was changed: %q", got)
			}
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			p := filepath.Join(out, filepath.FromSlash(tt.write))
			fi, err := os.Lstat(p)
			if err != nil || !fi.Mode().IsRegular() {
				t.Fatalf("%s: %v, %v", tt.write, fi, err)
			}
			if got, _ := os.ReadFile(p); string(got) != "output" {
				t.Errorf("content %q", got)
			}
			if n, err := RemoveTemps(out); n != 0 || err != nil {
				t.Errorf("temporary files left: %d, %v", n, err)
			}
		})
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// CommitIn puts a group in place: every file with its content, no temporary file left, and
// a file whose rename fails (a folder holds its name) is the only one that fails.
func TestStageAndCommitGroup(t *testing.T) {
	for _, n := range []int{1, 2, 5} { // one file takes the per-file sync path
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			dir := t.TempDir()
			root, err := os.OpenRoot(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer root.Close()
			if err := os.MkdirAll(filepath.Join(dir, "sub", "blocked.png", "x"), 0o755); err != nil {
				t.Fatal(err)
			}
			var files []Staged
			var names []string
			for i := range n {
				name := fmt.Sprintf("sub/f%d.png", i)
				if i == n-1 {
					name = "sub/blocked.png" // a non-empty folder: the rename fails
				}
				s, err := StageIn(root, name, func(w io.Writer) error { _, err := fmt.Fprint(w, name); return err })
				if err != nil {
					t.Fatal(err)
				}
				if s.Name() != filepath.FromSlash(name) {
					t.Errorf("Name() = %q, want %q", s.Name(), name)
				}
				if _, err := os.Stat(filepath.Join(dir, name)); i < n-1 && err == nil {
					t.Errorf("%s is in place before CommitIn", name)
				}
				files, names = append(files, s), append(names, name)
			}
			errs := CommitIn(root, files)
			for i, name := range names {
				if i == n-1 {
					if errs[i] == nil {
						t.Errorf("%s: no error renaming over a folder", name)
					}
					continue
				}
				if errs[i] != nil {
					t.Errorf("%s: %v", name, errs[i])
				}
				if b, err := os.ReadFile(filepath.Join(dir, name)); err != nil || string(b) != name {
					t.Errorf("%s holds %q, %v", name, b, err)
				}
			}
			if n, err := RemoveTemps(dir); n != 0 || err != nil {
				t.Errorf("%d temporary files left (%v)", n, err)
			}
		})
	}
}

// Discard removes a staged file's temporary file and leaves the name untouched.
func TestStagedDiscard(t *testing.T) {
	dir := t.TempDir()
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	if err := os.WriteFile(filepath.Join(dir, "a.png"), []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := StageIn(root, "a.png", func(w io.Writer) error { _, err := io.WriteString(w, "new"); return err })
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Discard(root); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "a.png")); string(b) != "old" {
		t.Errorf("a.png holds %q after Discard, want the old content", b)
	}
	if n, _ := RemoveTemps(dir); n != 0 {
		t.Errorf("%d temporary files left", n)
	}
	if _, err := StageIn(root, "../x.png", func(io.Writer) error { return nil }); err == nil {
		t.Error("StageIn outside the root: no error")
	}
	boom := errors.New("boom")
	if _, err := StageIn(root, "b.png", func(io.Writer) error { return boom }); !errors.Is(err, boom) {
		t.Errorf("StageIn with a failing write: %v, want boom", err)
	}
	if n, _ := RemoveTemps(dir); n != 0 {
		t.Errorf("%d temporary files left after a failed write", n)
	}
}
