package main

import (
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"

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

// TestMarkdownLinks checks the links of every Markdown page of the repository: each names a
// file of the repository, and with "#anchor" one of its headings. A link to a page outside the
// repository is an error too: the repository carries its own documentation.
func TestMarkdownLinks(t *testing.T) {
	root := filepath.Join("..", "..")
	var pages []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && p != root && strings.HasPrefix(d.Name(), ".") {
			return filepath.SkipDir // .git, .gpu, .ci and other tools' folders
		}
		if !d.IsDir() && strings.HasSuffix(p, ".md") {
			pages = append(pages, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(pages) < 5 {
		t.Fatalf("found %d Markdown pages under %s, want the README, docs/ and bench/'s", len(pages), root)
	}
	links := 0
	for _, page := range pages {
		for _, link := range markdownLinks(t, page) {
			links++
			target, anchor, _ := strings.Cut(link, "#")
			switch {
			case strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:"):
				t.Errorf("%s links %s, outside the repository", page, link)
				continue
			case target == "":
				target = page
			default:
				target = filepath.Join(filepath.Dir(page), target)
			}
			if rel, err := filepath.Rel(root, target); err != nil || strings.HasPrefix(rel, "..") {
				t.Errorf("%s links %s, outside the repository", page, link)
				continue
			}
			if _, err := os.Stat(target); err != nil {
				t.Errorf("%s links %s, which does not exist", page, link)
				continue
			}
			if anchor != "" && !slices.Contains(headingAnchors(t, target), anchor) {
				t.Errorf("%s links %s, but %s has no heading with that anchor", page, link, target)
			}
		}
	}
	if links < 20 {
		t.Errorf("found %d links in %d pages; the pattern must have missed some", links, len(pages))
	}
}

var (
	fencedBlock  = regexp.MustCompile("(?ms)^```.*?^```")
	codeSpan     = regexp.MustCompile("`[^`\n]*`")
	markdownLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)
)

// markdownLinks returns the targets of a page's links and images, outside code.
func markdownLinks(t *testing.T, page string) []string {
	t.Helper()
	text, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	prose := codeSpan.ReplaceAllString(fencedBlock.ReplaceAllString(string(text), ""), "")
	var links []string
	for _, m := range markdownLink.FindAllStringSubmatch(prose, -1) {
		links = append(links, m[1])
	}
	return links
}

// headingAnchors returns the anchors GitHub gives a page's headings: lower case, spaces as
// hyphens, punctuation other than hyphens and underscores dropped.
func headingAnchors(t *testing.T, page string) []string {
	t.Helper()
	text, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	var anchors []string
	for _, line := range strings.Split(fencedBlock.ReplaceAllString(string(text), ""), "\n") {
		heading, ok := strings.CutPrefix(strings.TrimLeft(line, "#"), " ")
		if !ok || !strings.HasPrefix(line, "#") {
			continue
		}
		anchors = append(anchors, strings.Map(func(r rune) rune {
			switch {
			case r == ' ':
				return '-'
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				return unicode.ToLower(r)
			}
			return -1
		}, heading))
	}
	return anchors
}
