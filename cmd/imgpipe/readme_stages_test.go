package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// readmePath is the repository's README, whose "### Stages" section shows `imgpipe stages`.
var readmePath = filepath.Join("..", "..", "README.md")

// readmeStagesHeading starts the README section whose first code block is the stage table.
const readmeStagesHeading = "\n### Stages\n"

// readmeStagesBlock returns the offsets in readme of the text inside the first fenced code
// block after readmeStagesHeading, or ok false when there is none.
func readmeStagesBlock(readme string) (start, end int, ok bool) {
	h := strings.Index(readme, readmeStagesHeading)
	if h < 0 {
		return 0, 0, false
	}
	open := strings.Index(readme[h:], "\n```\n")
	if open < 0 {
		return 0, 0, false
	}
	start = h + open + len("\n```\n")
	close := strings.Index(readme[start:], "```\n")
	if close < 0 {
		return 0, 0, false
	}
	return start, start + close, true
}

// TestREADMEStages checks that the README's stage table is what `imgpipe stages` prints: the
// table comes from the registry the CLI lists, so a stage or parameter added there shows here.
// `go test ./cmd/imgpipe -run TestREADMEStages -update` rewrites the table.
func TestREADMEStages(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"stages"}, &stdout, &stderr); code != exitOK {
		t.Fatalf("imgpipe stages: exit %d; stderr:\n%s", code, stderr.String())
	}
	want := stdout.String()
	text, err := os.ReadFile(readmePath)
	if err != nil {
		t.Fatal(err)
	}
	readme := string(text)
	start, end, ok := readmeStagesBlock(readme)
	if !ok {
		t.Fatalf("%s has no code block after %q", readmePath, strings.TrimSpace(readmeStagesHeading))
	}
	if *update && readme[start:end] != want {
		readme = readme[:start] + want + readme[end:]
		if err := os.WriteFile(readmePath, []byte(readme), 0o644); err != nil {
			t.Fatal(err)
		}
		start, end, _ = readmeStagesBlock(readme)
	}
	if got := readme[start:end]; got != want {
		t.Errorf("%s's stage table is not what `imgpipe stages` prints; regenerate it: "+
			"go test ./cmd/imgpipe -run TestREADMEStages -update\ngot:\n%s\nwant:\n%s", readmePath, got, want)
	}
}

// TestREADMEStagesBlock pins how the table is found: the first code block after the heading.
func TestREADMEStagesBlock(t *testing.T) {
	readme := "# x\n```\nnot this\n```\n\n### Stages\n\ntext\n\n```\nTABLE\n```\n\n```\nnot this\n```\n"
	start, end, ok := readmeStagesBlock(readme)
	if !ok || readme[start:end] != "TABLE\n" {
		t.Fatalf("block = %q, %v; want \"TABLE\\n\"", readme[start:end], ok)
	}
	if _, _, ok := readmeStagesBlock("### Stages\n```\nx\n"); ok {
		t.Error("found a block in a README without the heading or a closing fence")
	}
}
