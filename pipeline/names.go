package pipeline

import (
	"context"
	"fmt"
	"path"
	"strings"
)

// The placeholders of an output name template (imgpipe run --name).
const (
	// NameStem is the input's output stem: its file name without the extension, or with
	// it where Folder's clash rule keeps it (a.jpg and a.png give a.jpg and a.png).
	NameStem = "{stem}"
	// NameExt is the save format's extension; a template ends with "." and it.
	NameExt = "{ext}"
)

// CheckNameTemplate says why t cannot name outputs: it must hold {stem} once (so that
// distinct inputs keep distinct names, the clash rule with them), end with ".{ext}" (so
// that a name says its format), and hold no '/' and no other '{'.
func CheckNameTemplate(t string) error {
	base, ok := strings.CutSuffix(t, "."+NameExt)
	switch {
	case !ok:
		return fmt.Errorf("name template %q: end it with .%s, the save format's extension", t, NameExt)
	case strings.Count(base, NameStem) != 1:
		return fmt.Errorf("name template %q: hold %s once, so that every input gets a name of its own", t, NameStem)
	case strings.ContainsAny(t, `/\`):
		return fmt.Errorf("name template %q: a name, not a path (outputs keep their input's folder)", t)
	case strings.Contains(strings.Replace(base, NameStem, "", 1), "{"):
		return fmt.Errorf("name template %q: the placeholders are %s and %s", t, NameStem, NameExt)
	}
	return nil
}

// Rename returns src with every input's output stem made by template (see
// CheckNameTemplate; a template without {stem} names the one output of a single input):
// the input's folder is kept, and {stem} is its stem as src gave it, so that the clash
// rule's distinct names stay distinct.
func Rename(src Source, template string) Source {
	return &renamed{src, strings.TrimSuffix(template, "."+NameExt)}
}

type renamed struct {
	Source
	base string
}

func (r *renamed) Next(ctx context.Context) (Input, error) {
	in, err := r.Source.Next(ctx)
	if err != nil {
		return in, err
	}
	st := in.OutStem
	if st == "" {
		st = stem(in.Name)
	}
	dir, file := path.Split(st)
	in.OutStem = dir + strings.Replace(r.base, NameStem, file, 1)
	return in, nil
}
