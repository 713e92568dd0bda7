package manpage

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

func TestWriteText(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"one line", ".PP\none line\n"},
		{"a\nb\n\nc\n", ".PP\na\nb\n.PP\nc\n"},
		{"intro:\n\n  run -x\n\n  run -y\nafter", ".PP\nintro:\n.PP\n.EX\n  run \\-x\n\n  run \\-y\n.EE\n.PP\nafter\n"},
		{"  block at the end\n\n", ".PP\n.EX\n  block at the end\n.EE\n"},
		{".starts a request\n'so does this", ".PP\n\\&.starts a request\n\\&'so does this\n"},
		{`a\b`, ".PP\na\\eb\n"},
	} {
		var b strings.Builder
		writeText(&b, tc.in)
		if b.String() != tc.want {
			t.Errorf("writeText(%q) =\n%q\nwant\n%q", tc.in, b.String(), tc.want)
		}
	}
}

func tree() *cobra.Command {
	root := &cobra.Command{Use: "tool", Short: "Does things", Long: "Tool does things.\n\n  tool run\n"}
	root.PersistentFlags().Bool("quiet", false, "say less")
	run := &cobra.Command{Use: "run [FILE]", Short: "Run it", Example: "  tool run -n 3 x", Run: func(*cobra.Command, []string) {}}
	run.Flags().IntP("count", "n", 2, "how many `N` to run")
	run.Flags().String("secret", "", "hidden")
	run.Flags().MarkHidden("secret")
	hidden := &cobra.Command{Use: "internal", Hidden: true, Run: func(*cobra.Command, []string) {}}
	root.AddCommand(run, hidden)
	return root
}

func TestWrite(t *testing.T) {
	run, _, err := tree().Find([]string{"run"})
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := Write(&b, run, "tool v1"); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	for _, want := range []string{
		".TH \"TOOL-RUN\" \"1\" \"\" \"tool v1\" \"\"\n",
		".SH NAME\ntool\\-run \\- Run it\n",
		".SH SYNOPSIS\n\\fBtool run [FILE] [flags]\\fR\n",
		".SH DESCRIPTION\n.PP\nRun it\n",
		".SH OPTIONS\n.TP\n\\fB\\-n\\fR, \\fB\\-\\-count\\fR \\fIN\\fR\nhow many N to run (default 2)\n",
		".SH OPTIONS INHERITED FROM PARENT COMMANDS\n.TP\n\\fB\\-\\-quiet\\fR\nsay less\n",
		".SH EXAMPLES\n.PP\n.EX\n  tool run \\-n 3 x\n.EE\n",
		".SH SEE ALSO\n\\fBtool(1)\\fR\n",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q:\n%s", want, page)
		}
	}
	if strings.Contains(page, "secret") {
		t.Errorf("a hidden flag is listed:\n%s", page)
	}
}

func TestWriteTree(t *testing.T) {
	dir := t.TempDir()
	if err := WriteTree(dir, tree(), "tool v1"); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if got := strings.Join(names, " "); got != "tool-run.1 tool.1" {
		t.Errorf("pages %s, want tool-run.1 tool.1 (no hidden command, no help)", got)
	}
	root, _ := os.ReadFile(filepath.Join(dir, "tool.1"))
	if !strings.Contains(string(root), ".SH SEE ALSO\n\\fBtool-run(1)\\fR\n") {
		t.Errorf("tool.1:\n%s", root)
	}
	if err := WriteTree(filepath.Join(dir, "missing"), tree(), "v"); err == nil {
		t.Error("WriteTree into a missing folder: no error")
	}
}
