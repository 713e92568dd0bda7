package pipeline

import (
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestSelectionTakes(t *testing.T) {
	for _, tc := range []struct {
		sel  Selection
		rel  string
		want bool
	}{
		{Selection{}, "a/b.JPG", true},
		{Selection{}, "a/b.txt", false},
		{Selection{}, "noext", false},
		{Selection{Exts: []string{"png"}}, "a.PNG", true},
		{Selection{Exts: []string{".png"}}, "a.png", true},
		{Selection{Exts: []string{"png"}}, "a.jpg", false},
		{Selection{Exts: []string{"heic"}}, "x/y.heic", true},
		{Selection{Include: []string{"**/*.jpg"}}, "a.jpg", true},
		{Selection{Include: []string{"**/*.jpg"}}, "a/b/c.jpg", true},
		// Without '/', a pattern matches the base name at any depth (as rclone's).
		{Selection{Include: []string{"*.jpg"}}, "a/b.jpg", true},
		{Selection{Include: []string{"*.jpg"}}, "b.jpg", true},
		{Selection{Exclude: []string{"*Storm*"}}, "2024/x/Storm_1.jpg", false},
		{Selection{Exclude: []string{"*Storm*"}}, "Storm/calm.jpg", true}, // a folder's name is not the file's
		{Selection{Include: []string{"b.jpg"}}, "a/b.jpg", true},
		{Selection{Include: []string{"{a,b}.png"}}, "x/y/a.png", true},
		// With '/', it matches the whole path from the root; '*' does not cross '/'.
		{Selection{Include: []string{"a/*.jpg"}}, "a/b.jpg", true},
		{Selection{Include: []string{"a/*.jpg"}}, "x/a/b.jpg", false},
		{Selection{Include: []string{"a/*.jpg"}}, "a/c/b.jpg", false},
		{Selection{Include: []string{"/b.jpg"}}, "b.jpg", true}, // a leading '/' only anchors
		{Selection{Include: []string{"/b.jpg"}}, "a/b.jpg", false},
		// The README's table of examples.
		{Selection{Include: []string{"*Storm*"}}, "2024/Storm_2.jpg", true},
		{Selection{Include: []string{"*Storm*"}}, "Storm/calm.jpg", false},
		{Selection{Include: []string{"raw/*.png"}}, "raw/deep/a.png", false},
		{Selection{Include: []string{"raw/**"}}, "x/raw/a.png", false},
		{Selection{Include: []string{"**/raw/**"}}, "raw/a.png", true},
		{Selection{Include: []string{"**/raw/**"}}, "x/raw/deep/a.png", true},
		{Selection{Include: []string{"**/raw/**"}}, "rawish/a.png", false},
		{Selection{Include: []string{"raw/**"}}, "raw/x/y.png", true},
		{Selection{Include: []string{"raw/**"}}, "cooked/y.png", false},
		{Selection{Include: []string{"{a,b}/*.png"}}, "b/1.png", true},
		{Selection{Exclude: []string{"**/thumbs/**"}}, "x/thumbs/1.png", false},
		{Selection{Exclude: []string{"**/thumbs/**"}}, "x/thumb/1.png", true},
		{Selection{Include: []string{"**"}, Exclude: []string{"a/*"}}, "a/1.png", false}, // exclude wins
		{Selection{Include: []string{"A/*"}}, "a/1.png", false},                          // case-sensitive paths
	} {
		if err := tc.sel.Check(); err != nil {
			t.Fatalf("%+v: %v", tc.sel, err)
		}
		if got := tc.sel.Takes(tc.rel); got != tc.want {
			t.Errorf("%+v.Takes(%q) = %v, want %v", tc.sel, tc.rel, got, tc.want)
		}
	}
}

func TestSelectionTakesInfo(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		sel  Selection
		size int64
		mod  time.Time
		want bool
	}{
		{Selection{}, 0, time.Time{}, true},
		{Selection{MinSize: 100}, 100, t0, true},
		{Selection{MinSize: 100}, 99, t0, false},
		{Selection{MaxSize: 100}, 100, t0, true},
		{Selection{MaxSize: 100}, 101, t0, false},
		{Selection{ModifiedAfter: t0}, 1, t0.Add(time.Second), true},
		{Selection{ModifiedAfter: t0}, 1, t0, false},
		{Selection{ModifiedBefore: t0}, 1, t0.Add(-time.Second), true},
		{Selection{ModifiedBefore: t0}, 1, t0.Add(time.Second), false},
		{Selection{MinSize: 1, ModifiedBefore: t0}, 0, t0.Add(-time.Second), false},
	} {
		if got := tc.sel.TakesInfo(tc.size, tc.mod); got != tc.want {
			t.Errorf("%+v.TakesInfo(%d, %v) = %v, want %v", tc.sel, tc.size, tc.mod, got, tc.want)
		}
		if tc.sel.ByInfo() != (tc.sel.MinSize != 0 || tc.sel.MaxSize != 0 || !tc.sel.ModifiedAfter.IsZero() || !tc.sel.ModifiedBefore.IsZero()) {
			t.Errorf("%+v.ByInfo() = %v", tc.sel, tc.sel.ByInfo())
		}
	}
}

func TestSelectionCheckReportsEveryError(t *testing.T) {
	err := Selection{Include: []string{"[a", "ok/**"}, Exclude: []string{""}, Exts: []string{"", "a/b", "jpg"}}.Check()
	got := Errors(err)
	want := []string{`--include "[a"`, `--exclude ""`, `--ext ""`, `--ext "a/b"`}
	if len(got) != len(want) {
		t.Fatalf("got %d errors, want %d: %v", len(got), len(want), err)
	}
	for i, w := range want {
		if !strings.HasPrefix(got[i].Error(), w) {
			t.Errorf("error %d = %v, want it to start with %s", i, got[i], w)
		}
	}
}

func TestSelectionCheckBounds(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		sel  Selection
		want string // "" for no error
	}{
		{Selection{MinSize: 1, MaxSize: 1}, ""},
		{Selection{MinSize: 2, MaxSize: 1}, "the minimum not over the maximum"},
		{Selection{MinSize: -1}, "want sizes of 0 or more"},
		{Selection{ModifiedAfter: t0, ModifiedBefore: t0.Add(time.Hour)}, ""},
		{Selection{ModifiedAfter: t0, ModifiedBefore: t0}, "--max-age must be the longer"},
	} {
		err := tc.sel.Check()
		if (err == nil) != (tc.want == "") || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%+v.Check() = %v, want %q", tc.sel, err, tc.want)
		}
	}
}

func TestFolderSelect(t *testing.T) {
	dir := t.TempDir()
	x := []byte("x")
	writeFiles(t, dir, map[string][]byte{
		"a.jpg": x, "a.png": x, "b.png": x, "raw/c.jpg": x, "raw/deep/d.jpg": x, "keep/e.tif": x, "f.heic": x,
	})
	for _, tc := range []struct {
		name string
		sel  Selection
		want string // name>outstem, in walk order
	}{
		{"default", Selection{}, "a.jpg>a.jpg a.png>a.png b.png>b keep/e.tif>keep/e raw/c.jpg>raw/c raw/deep/d.jpg>raw/deep/d"},
		// Only one of a.jpg and a.png is selected: no clash left, so a's output is a.*.
		{"jpg only", Selection{Exts: []string{"jpg"}}, "a.jpg>a raw/c.jpg>raw/c raw/deep/d.jpg>raw/deep/d"},
		{"include", Selection{Include: []string{"raw/**"}}, "raw/c.jpg>raw/c raw/deep/d.jpg>raw/deep/d"},
		{"exclude", Selection{Exclude: []string{"raw/**", "*.png"}}, "a.jpg>a keep/e.tif>keep/e"},
		{"ext not decodable", Selection{Exts: []string{"heic"}}, "f.heic>f"},
		{"name at any depth", Selection{Include: []string{"*.jpg"}}, "a.jpg>a raw/c.jpg>raw/c raw/deep/d.jpg>raw/deep/d"},
		{"no file that small", Selection{MaxSize: 1, Include: []string{"none"}}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, in := range listAll(t, FolderSelect(dir, tc.sel)) {
				got = append(got, in.Name+">"+in.OutStem)
			}
			if g := strings.Join(got, " "); g != tc.want {
				t.Errorf("got  %s\nwant %s", g, tc.want)
			}
		})
	}
}

func TestReadFileList(t *testing.T) {
	got, err := ReadFileList(strings.NewReader("a.jpg\r\n\nsub dir/b c.png\n  d.png\n"))
	if err != nil {
		t.Fatal(err)
	}
	if g := strings.Join(got, "|"); g != "a.jpg|sub dir/b c.png|  d.png" {
		t.Errorf("got %q", g)
	}
	long := strings.Repeat("x", maxListLine+1)
	if _, err := ReadFileList(strings.NewReader("a\n" + long + "\n")); err == nil || !strings.Contains(err.Error(), "too long") {
		t.Errorf("a %d-byte line: error %v, want token too long", len(long), err)
	}
}

func TestFiles(t *testing.T) {
	dir := t.TempDir()
	x := []byte("x")
	writeFiles(t, dir, map[string][]byte{"p/a.jpg": x, "p/a.png": x, "p/q/b.jpg": x, "r/c.jpg": x, "notes.txt": x})
	j := func(rel string) string { return filepath.Join(dir, filepath.FromSlash(rel)) }
	for _, tc := range []struct {
		name  string
		paths []string
		sel   Selection
		want  string // name>outstem[!error], in list order
	}{
		{"single file", []string{j("p/q/b.jpg")}, Selection{}, "b.jpg>b"},
		{"common folder", []string{j("p/q/b.jpg"), j("p/a.jpg")}, Selection{}, "q/b.jpg>q/b a.jpg>a"},
		{"across folders", []string{j("r/c.jpg"), j("p/a.jpg"), j("p/a.png")}, Selection{}, "r/c.jpg>r/c p/a.jpg>p/a.jpg p/a.png>p/a.png"},
		{"selection applies", []string{j("p/a.jpg"), j("notes.txt"), j("p/a.png")}, Selection{Exclude: []string{"**/*.png"}}, "p/a.jpg>p/a"},
		{"listed twice", []string{j("p/a.jpg"), j("p/../p/a.jpg")}, Selection{}, "a.jpg>a a.jpg>!listed twice"},
		{"missing file is an input", []string{j("p/a.jpg"), j("p/gone.jpg")}, Selection{}, "a.jpg>a gone.jpg>gone"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src, err := Files(tc.paths, tc.sel)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, in := range listAll(t, src) {
				s := in.Name + ">" + in.OutStem
				if in.Err != nil {
					s = in.Name + ">!" + in.Err.Error()[:len("listed twice")]
				}
				got = append(got, s)
			}
			if g := strings.Join(got, " "); g != tc.want {
				t.Errorf("got  %s\nwant %s", g, tc.want)
			}
		})
	}
	// Relative paths are taken from the working folder.
	t.Chdir(dir)
	src, err := Files([]string{"p/a.jpg", "r/c.jpg"}, Selection{})
	if err != nil {
		t.Fatal(err)
	}
	if ins := listAll(t, src); len(ins) != 2 || ins[0].Name != "p/a.jpg" || ins[0].Path != "p/a.jpg" {
		t.Errorf("relative list gave %+v", ins)
	}
}
