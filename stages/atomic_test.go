package stages

import (
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
