package folderrun

import (
	"io"
	"os"
	"path/filepath"
	"testing"
)

// checkWritable tells a folder a run can write into from one it cannot (sysfs refuses new
// files even to root, so the refusal is tested wherever a test runs), and leaves nothing.
func TestCheckWritable(t *testing.T) {
	dir := t.TempDir()
	if err := checkWritable(dir); err != nil {
		t.Errorf("a temporary folder: %v", err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("left %v", ents)
	}
	if err := checkWritable(filepath.Join(dir, "none")); err == nil {
		t.Error("a missing folder: no error")
	}
	if _, err := os.Stat("/sys/kernel"); err == nil {
		if err := checkWritable("/sys/kernel"); err == nil {
			t.Error("/sys/kernel: no error")
		}
	}
}

// localOutput is the folder a run writes into, for a folder or a file:// bucket.
func TestLocalOutput(t *testing.T) {
	for in, want := range map[string]string{
		"out": "out", "file:///data/out": "/data/out", "file:///data?prefix=out/": "/data/out", "s3://b/out": "", "": "",
	} {
		if got := localOutput(in); got != want {
			t.Errorf("localOutput(%q) = %q, want %q", in, got, want)
		}
	}
}

// WriteFile writes a new or regular file, and refuses a link, a FIFO or a folder there,
// leaving it as it was.
func TestWriteFile(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "input.png")
	if err := os.WriteFile(target, []byte("input"), 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link.jsonl")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	write := func(w io.Writer) error { _, err := io.WriteString(w, "report"); return err }
	for _, p := range []string{link, dir} {
		if err := WriteFile(p, write); err == nil {
			t.Errorf("%s: written", p)
		}
	}
	if b, _ := os.ReadFile(target); string(b) != "input" {
		t.Errorf("the link's target is now %q", b)
	}
	p := filepath.Join(dir, "r.jsonl")
	if err := WriteFile(p, write); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(p); string(b) != "report" {
		t.Errorf("wrote %q", b)
	}
}
