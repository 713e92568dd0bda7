package job

import (
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"

	"github.com/imgpipe/imgpipe/fsguard"
)

// yamlBombs are job files built to take time or memory out of all proportion to their
// size: aliases that expand exponentially (billion laughs), deep nesting, a document at
// the size limit, many documents, a long flow sequence.
func yamlBombs() map[string]string {
	var laughs strings.Builder
	laughs.WriteString("a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n")
	for i := 1; i < 12; i++ {
		fmt.Fprintf(&laughs, "a%d: &a%d [*a%[3]d, *a%[3]d, *a%[3]d, *a%[3]d, *a%[3]d, *a%[3]d, *a%[3]d, *a%[3]d, *a%[3]d]\n", i, i, i-1)
	}
	laughs.WriteString("pipeline: *a11\n")
	// The loader follows aliases: one mapping of 40,000 parameters aliased by 250 stages is
	// ten million unknown parameters for a 430 KB file.
	var params strings.Builder
	params.WriteString("x: &big {")
	for i := range 40_000 {
		fmt.Fprintf(&params, "k%d: 1, ", i)
	}
	params.WriteString("}\npipeline:\n" + strings.Repeat("  - blur: *big\n", 250))
	return map[string]string{
		"billion laughs":       laughs.String(),
		"aliased parameters":   params.String(),
		"laughs in a pipeline": "x: &x [decode, decode, decode, decode]\ny: &y [*x, *x, *x, *x, *x, *x, *x, *x]\nz: &z [*y, *y, *y, *y, *y, *y, *y, *y]\npipeline: [*z, *z, *z, *z, *z, *z, *z, *z]\n",
		"deep flow nesting":    "pipeline: " + strings.Repeat("[", 100_000) + strings.Repeat("]", 100_000) + "\n",
		"deep block nesting":   strings.Repeat("- ", 20_000) + "x\n",
		"deep mappings":        strings.Repeat("{a: ", 50_000) + "1" + strings.Repeat("}", 50_000) + "\n",
		"at the size limit":    "pipeline: [" + strings.Repeat("decode, ", (maxJobBytes-20)/8) + "]\n",
		"over the size limit":  "pipeline: [" + strings.Repeat("decode, ", maxJobBytes/8+1) + "]\n",
		"many documents":       strings.Repeat("---\na: 1\n", 100_000),
		"long scalar":          "input: {dir: " + strings.Repeat("x", maxJobBytes-20) + "}\n",
	}
}

// A YAML bomb is an error (or a plain job), in bounded memory: the parser's alias,
// depth and size limits hold before the document is expanded.
func TestYAMLBombs(t *testing.T) {
	for name, doc := range yamlBombs() {
		t.Run(name, func(t *testing.T) {
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			_, err := Parse("bomb.yaml", []byte(doc))
			runtime.ReadMemStats(&after)
			if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 512<<20 {
				t.Errorf("parsing took %d MB", alloc>>20)
			}
			if err == nil && name != "long scalar" { // a long path is a job like any other
				t.Errorf("no error")
			}
		})
	}
}

// A job file that is a FIFO or a device is refused at once: never waited on, never read
// without end.
func TestLoadSpecialFiles(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "job.yaml")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{fifo, "/dev/zero", t.TempDir()} {
		if _, err := Load(p); !errors.Is(err, fsguard.ErrNotRegular) {
			t.Errorf("%s: %v, want a refusal", p, err)
		}
	}
}
