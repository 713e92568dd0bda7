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
	pages := map[string]markdownPage{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && p != root && strings.HasPrefix(d.Name(), ".") {
			return filepath.SkipDir // .git, .gpu, .ci and other tools' folders
		}
		if !d.IsDir() && strings.HasSuffix(p, ".md") {
			text, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			pages[p] = parseMarkdown(string(text))
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
	for page, md := range pages {
		for _, link := range md.links {
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
			if anchor != "" && !slices.Contains(pages[target].anchors, anchor) {
				t.Errorf("%s links %s, but %s has no heading with that anchor", page, link, target)
			}
		}
	}
	if links < 20 {
		t.Errorf("found %d links in %d pages; the pattern must have missed some", links, len(pages))
	}
}

// markdownPage is what TestMarkdownLinks reads of a page, outside code: the targets of its links
// and images, and the anchors GitHub gives its headings.
type markdownPage struct {
	links, anchors []string
}

var (
	fencedBlock  = regexp.MustCompile("(?ms)^```.*?^```")
	codeSpan     = regexp.MustCompile("`[^`\n]*`")
	markdownLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)
)

// parseMarkdown reads a page's links and heading anchors. An anchor is the heading in lower case,
// spaces as hyphens, punctuation other than hyphens and underscores dropped.
func parseMarkdown(text string) markdownPage {
	var md markdownPage
	text = fencedBlock.ReplaceAllString(text, "")
	for _, m := range markdownLink.FindAllStringSubmatch(codeSpan.ReplaceAllString(text, ""), -1) {
		md.links = append(md.links, m[1])
	}
	for _, line := range strings.Split(text, "\n") {
		heading, ok := strings.CutPrefix(strings.TrimLeft(line, "#"), " ")
		if !ok || !strings.HasPrefix(line, "#") {
			continue
		}
		md.anchors = append(md.anchors, strings.Map(func(r rune) rune {
			switch {
			case r == ' ':
				return '-'
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				return unicode.ToLower(r)
			}
			return -1
		}, heading))
	}
	return md
}
