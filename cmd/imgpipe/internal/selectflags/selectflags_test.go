package selectflags

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

func parse(t *testing.T, args ...string) (*Flags, error) {
	t.Helper()
	var f Flags
	fs := pflag.NewFlagSet("run", pflag.ContinueOnError)
	f.Register(fs)
	return &f, fs.Parse(args)
}

func TestSelection(t *testing.T) {
	dir := t.TempDir()
	inc, exc := filepath.Join(dir, "inc.txt"), filepath.Join(dir, "exc.txt")
	os.WriteFile(inc, []byte("# photos\n*.jpg\n\nraw/**\n"), 0o644)
	os.WriteFile(exc, []byte("*Storm*\n"), 0o644)
	now := time.Date(2026, 6, 15, 12, 0, 0, 0, time.UTC)
	f, err := parse(t, "--include", "a.png", "--include-from", inc, "--exclude-from", exc, "--exclude", "x/*",
		"--min-size", "1k", "--max-size", "2M", "--max-age", "2d", "--min-age", "1h", "--ext", "jpg,png")
	if err != nil {
		t.Fatal(err)
	}
	sel, err := f.Selection(now)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(sel.Include, []string{"a.png", "*.jpg", "raw/**"}) || !slices.Equal(sel.Exclude, []string{"x/*", "*Storm*"}) ||
		!slices.Equal(sel.Exts, []string{"jpg", "png"}) || sel.MinSize != 1<<10 || sel.MaxSize != 2<<20 ||
		!sel.ModifiedAfter.Equal(now.Add(-48*time.Hour)) || !sel.ModifiedBefore.Equal(now.Add(-time.Hour)) {
		t.Errorf("%+v", sel)
	}
	if err := sel.Check(); err != nil {
		t.Error(err)
	}
}

// TestSelectionErrors: every bad value and missing file is reported, in flag order.
func TestSelectionErrors(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "none.txt")
	f, err := parse(t, "--include-from", missing, "--exclude-from", missing, "--min-size", "big", "--max-age", "soon")
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.Selection(time.Now())
	if err == nil {
		t.Fatal("no error")
	}
	want := []string{"--include-from " + missing + ": open", "--exclude-from " + missing, `--min-size "big": want a size`, `--max-age "soon": want an age`}
	got := strings.Split(err.Error(), "\n")
	if len(got) != len(want) {
		t.Fatalf("errors:\n%v\nwant %d", err, len(want))
	}
	for i, w := range want {
		if !strings.Contains(got[i], w) {
			t.Errorf("error %d = %q, want %q", i, got[i], w)
		}
	}
}
