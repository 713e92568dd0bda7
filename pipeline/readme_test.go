package pipeline

import (
	"bytes"
	"go/format"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// readmeSnippets returns the ```go blocks of the README's "From Go" section.
func readmeSnippets(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	s := string(data)
	start := strings.Index(s, "\n## From Go\n")
	if start < 0 {
		t.Fatal(`README.md has no "## From Go" section`)
	}
	s = s[start+1:]
	if end := strings.Index(s, "\n## "); end >= 0 {
		s = s[:end]
	}
	var out []string
	for _, m := range regexp.MustCompile("(?s)\n```go\n(.*?)\n```\n").FindAllStringSubmatch(s, -1) {
		out = append(out, m[1]+"\n")
	}
	return out
}

// TestREADMEFromGo compiles the README's "From Go" snippets as written: each is a whole
// gofmt-formatted program, built against this module's packages.
func TestREADMEFromGo(t *testing.T) {
	snippets := readmeSnippets(t)
	if len(snippets) < 2 {
		t.Fatalf("the From Go section has %d go blocks, want the builder one and the custom stage one", len(snippets))
	}
	for i, src := range snippets {
		if !strings.HasPrefix(src, "package main\n") {
			t.Errorf("snippet %d does not start with \"package main\": it must compile as written", i+1)
		}
		if f, err := format.Source([]byte(src)); err != nil {
			t.Errorf("snippet %d: %v", i+1, err)
		} else if !bytes.Equal(f, []byte(src)) {
			t.Errorf("snippet %d is not gofmt-formatted; gofmt gives:\n%s", i+1, f)
		}
	}
	for _, want := range []string{"pipeline.New().Decode()", "folderrun.Run(", "pipeline.Folder(", "pipeline.ToFolder(",
		"pipeline.ImageInput(", ".ToImage()", "pipeline.StageDef{", "reg.Parse("} {
		if !strings.Contains(strings.Join(snippets, ""), want) {
			t.Errorf("the snippets do not show %s", want)
		}
	}
	if t.Failed() {
		return
	}
	if testing.Short() {
		t.Skip("-short: not building the README's snippets")
	}
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("the go tool is not on PATH; cannot build the README's snippets")
	}
	// Inside the module, so that its packages resolve; the leading '_' keeps the folder out
	// of ./... patterns while it exists.
	dir, err := os.MkdirTemp(".", "_readme")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	args := []string{"build", "-o", t.TempDir() + string(filepath.Separator)}
	for i, src := range snippets {
		sub := filepath.Join(dir, "snippet"+string(rune('1'+i)))
		if err := os.Mkdir(sub, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(sub, "main.go"), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		args = append(args, "./"+filepath.ToSlash(sub))
	}
	cmd := exec.Command(gobin, args...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the README's From Go snippets do not build (go %s): %v\n%s", strings.Join(args, " "), err, out)
	}
}
