package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/imgpipe/imgpipe/pipeline"
)

var update = flag.Bool("update", false, "rewrite docs/stages.md from the stage registry")

// stagesDocPath is the committed user reference of the stages.
var stagesDocPath = filepath.Join("..", "..", "docs", "stages.md")

// stagesMarkdown renders the stage reference from the registry: every stage's kind, GPU
// support, one-line help, full description and parameter table. It is the only writer of
// docs/stages.md, so the page says what the code does.
func stagesMarkdown(defs []*pipeline.StageDef) string {
	var b strings.Builder
	b.WriteString(`# Stages

<!-- Generated from the stage registry (pipeline/builtin.go) by
     go test ./cmd/imgpipe -run TestStagesDoc -update
     Do not edit by hand: TestStagesDoc fails when this page and the registry disagree. -->

A pipeline is a chain of stages separated by ` + "`|`" + `, each with ` + "`key=value`" + ` parameters:
` + "`decode | grayscale | blur sigma=1.5 | transpose | histogram | save format=png`" + `. A chain starts
with ` + "`decode`" + `, may end with ` + "`save`" + `, and holds at most one ` + "`histogram`" + `. All images are 8-bit,
interleaved, with 1 (gray) or 3 (RGB) channels. Every pixel stage is exact integer arithmetic
written down below; stages marked **GPU** also run on an NVIDIA GPU and give the same bits
there (**GPU** only: there alone, with no CPU implementation). ` + "`imgpipe stages`" + ` prints the same table, and ` + "`imgpipe stages --json`" + ` gives it as data.

`)
	for _, d := range defs {
		fmt.Fprintf(&b, "- [%s](#%s): %s\n", d.Name, d.Name, d.Help)
	}
	for _, d := range defs {
		kind := d.Kind.String() + " stage"
		if d.GPU != nil {
			kind += ", **GPU**"
		}
		if d.GPUOnly != "" {
			kind += " only (" + d.GPUOnly + ")"
		}
		fmt.Fprintf(&b, "\n## %s\n\n*%s.* %s.\n\n", d.Name, kind, d.Help)
		if d.Doc != "" {
			b.WriteString(strings.Join(strings.Fields(d.Doc), " ") + "\n\n")
		}
		if len(d.Params) == 0 {
			b.WriteString("No parameters.\n")
			continue
		}
		b.WriteString("| parameter | type | default | meaning |\n|---|---|---|---|\n")
		for _, ps := range d.Params {
			fmt.Fprintf(&b, "| `%s` | %s | `%v` | %s |\n", ps.Name, strings.ReplaceAll(paramType(ps), "|", "\\|"), ps.Default, strings.ReplaceAll(ps.Help, "|", "\\|"))
		}
	}
	b.WriteString("\nSee also: [the fast PNG encoding](png-fast.md), the exact specification of `save compression=fast`.\n")
	return b.String()
}

func TestStagesDoc(t *testing.T) {
	want := stagesMarkdown(pipeline.Builtin.Stages())
	if *update {
		if err := os.WriteFile(stagesDocPath, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(stagesDocPath)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Errorf("%s is not what the stage registry says; regenerate it: go test ./cmd/imgpipe -run TestStagesDoc -update", stagesDocPath)
	}
	for _, d := range pipeline.Builtin.Stages() {
		if !strings.Contains(string(got), "\n## "+d.Name+"\n") {
			t.Errorf("%s has no section for %s", stagesDocPath, d.Name)
		}
	}
}
