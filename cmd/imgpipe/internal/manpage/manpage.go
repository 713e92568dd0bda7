// Package manpage writes man pages (roff with the man(7) macros) from a cobra command tree,
// so that they never disagree with --help. It replaces cobra/doc, whose Markdown step
// links an unmaintained Markdown library; the help texts are plain text, which maps onto
// roff directly: blank lines part paragraphs, indented lines are kept as written.
package manpage

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// Section is the manual section of every page: user commands.
const Section = "1"

// Write writes cmd's page to w; source names the software in the header ("imgpipe v1.2").
func Write(w io.Writer, cmd *cobra.Command, source string) error {
	cmd.InitDefaultHelpFlag()
	name := pageName(cmd)
	var b strings.Builder
	fmt.Fprintf(&b, ".TH %q %q \"\" %q \"\"\n.nh\n.ad l\n", strings.ToUpper(name), Section, source)
	fmt.Fprintf(&b, ".SH NAME\n%s \\- %s\n", escape(name), escape(cmd.Short))
	fmt.Fprintf(&b, ".SH SYNOPSIS\n\\fB%s\\fR\n", escape(cmd.UseLine()))
	desc := cmd.Long
	if desc == "" {
		desc = cmd.Short
	}
	b.WriteString(".SH DESCRIPTION\n")
	writeText(&b, desc)
	writeFlags(&b, "OPTIONS", cmd.NonInheritedFlags())
	writeFlags(&b, "OPTIONS INHERITED FROM PARENT COMMANDS", cmd.InheritedFlags())
	if cmd.Example != "" {
		b.WriteString(".SH EXAMPLES\n")
		writeText(&b, cmd.Example)
	}
	if see := seeAlso(cmd); len(see) > 0 {
		fmt.Fprintf(&b, ".SH SEE ALSO\n%s\n", strings.Join(see, ", "))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// WriteTree writes the page of cmd and of every command under it into dir, one file each,
// named as the command path joined by dashes ("imgpipe-run.1").
func WriteTree(dir string, cmd *cobra.Command, source string) error {
	for _, c := range pages(cmd) {
		if err := writeFile(filepath.Join(dir, pageName(c)+"."+Section), c, source); err != nil {
			return err
		}
	}
	return nil
}

func writeFile(path string, cmd *cobra.Command, source string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := Write(f, cmd, source); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// pages is cmd and every command under it that has a page: not help topics, hidden or
// deprecated commands, nor the help command.
func pages(cmd *cobra.Command) []*cobra.Command {
	out := []*cobra.Command{cmd}
	for _, c := range cmd.Commands() {
		if c.IsAvailableCommand() && !c.IsAdditionalHelpTopicCommand() {
			out = append(out, pages(c)...)
		}
	}
	return out
}

func pageName(cmd *cobra.Command) string { return strings.ReplaceAll(cmd.CommandPath(), " ", "-") }

// seeAlso names the pages of cmd's parent and children, as NAME(1) in bold.
func seeAlso(cmd *cobra.Command) []string {
	var cmds []*cobra.Command
	if cmd.HasParent() {
		cmds = append(cmds, cmd.Parent())
	}
	for _, c := range cmd.Commands() { // cobra sorts them by name
		if c.IsAvailableCommand() && !c.IsAdditionalHelpTopicCommand() {
			cmds = append(cmds, c)
		}
	}
	out := make([]string, len(cmds))
	for i, c := range cmds {
		out[i] = fmt.Sprintf("\\fB%s(%s)\\fR", pageName(c), Section) // plain hyphens, as man -k spells names
	}
	return out
}

// writeFlags writes a section listing the visible flags of fs, as help prints them.
func writeFlags(b *strings.Builder, title string, fs *pflag.FlagSet) {
	if !fs.HasAvailableFlags() {
		return
	}
	fmt.Fprintf(b, ".SH %s\n", title)
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Hidden || f.Deprecated != "" {
			return
		}
		b.WriteString(".TP\n")
		if f.Shorthand != "" && f.ShorthandDeprecated == "" {
			fmt.Fprintf(b, "\\fB\\-%s\\fR, ", escape(f.Shorthand))
		}
		fmt.Fprintf(b, "\\fB\\-\\-%s\\fR", escape(f.Name))
		varname, usage := pflag.UnquoteUsage(f)
		if varname != "" {
			fmt.Fprintf(b, " \\fI%s\\fR", escape(varname))
		}
		b.WriteString("\n")
		if !zeroDefault(f) {
			usage += fmt.Sprintf(" (default %s)", f.DefValue)
		}
		b.WriteString(line(usage) + "\n")
	})
}

// zeroDefault reports whether f's default says nothing worth printing, as --help decides.
func zeroDefault(f *pflag.Flag) bool {
	switch f.DefValue {
	case "", "0", "false", "[]", "<nil>":
		return true
	}
	return false
}

// writeText writes plain help text: paragraphs parted by blank lines, and runs of indented
// lines (examples, YAML) as preformatted blocks, kept as written.
func writeText(b *strings.Builder, text string) {
	inBlock, para, blanks := false, false, 0
	for _, l := range strings.Split(text, "\n") {
		if strings.TrimSpace(l) == "" {
			blanks++
			continue
		}
		indented := strings.HasPrefix(l, " ") || strings.HasPrefix(l, "\t")
		switch {
		case inBlock && indented:
			b.WriteString(strings.Repeat("\n", blanks)) // blank lines inside a block stay
		case inBlock:
			b.WriteString(".EE\n")
			inBlock, para = false, false
		case indented:
			b.WriteString(".PP\n.EX\n")
			inBlock = true
		case blanks > 0:
			para = false
		}
		if !inBlock && !para {
			b.WriteString(".PP\n")
			para = true
		}
		blanks = 0
		b.WriteString(line(l) + "\n")
	}
	if inBlock {
		b.WriteString(".EE\n")
	}
}

// line escapes one line of text for roff: it may not start a request.
func line(s string) string {
	s = escape(s)
	if strings.HasPrefix(s, ".") || strings.HasPrefix(s, "'") {
		s = `\&` + s
	}
	return s
}

// escape makes s literal roff text: a backslash is the escape character, and '-' is a
// hyphen unless escaped, where options and paths need a minus.
func escape(s string) string {
	return strings.NewReplacer(`\`, `\e`, "-", `\-`).Replace(s)
}
