package pipeline

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// Folder returns a source that walks dir recursively and yields its image files (by
// extension, see IsImageName) in a deterministic order: FolderSelect with the zero
// Selection.
func Folder(dir string, exclude ...string) Source {
	return FolderSelect(dir, Selection{}, exclude...)
}

// FolderSelect returns a source that walks dir recursively and yields the files sel takes
// (matched on their path relative to dir) in a deterministic order: each folder's entries sorted by
// name, subfolders walked where they sort. Folders in exclude (typically the output folder,
// when it lies inside the input folder) are not entered. Symbolic links to files are
// followed; links to folders are not, so a link cycle cannot trap the walk. Anything that is
// not a regular file (a FIFO, a device) is ignored, so reading never blocks.
//
// Output names (Input.OutStem) follow the clash rule: a file's output is its relative path
// with the extension replaced by the save format's, except when several selected files in
// one folder share a stem (a.jpg, a.png, a.JPG, compared without case): then EACH of them keeps
// its extension before the new one (a.jpg.png, a.png.png, a.JPG.png). The result is
// deterministic and independent of the walk's progress. If a name still collides (with
// a.jpg, a.png and a.png.jpg saved as png, a.png becomes a.png.png because it shares its stem
// with a.jpg, and a.png.jpg, whose stem a.png is unique, becomes a.png.png too), the later
// input fails with an error saying so and nothing is overwritten.
//
// Memory holds one folder listing per level of the current path, not the whole tree.
func FolderSelect(dir string, sel Selection, exclude ...string) Source {
	return &folderSource{root: dir, sel: sel, exclude: exclude}
}

type folderSource struct {
	root    string
	sel     Selection
	exclude []string
	skip    []os.FileInfo
	stack   []*dirList
	started bool
}

type dirList struct {
	rel     string // slash-separated, "" for the root
	entries []dirEntry
	i       int
}

type dirEntry struct {
	name    string
	dir     bool
	outStem string
	err     error
}

func (s *folderSource) Next(ctx context.Context) (Input, error) {
	if !s.started {
		s.started = true
		fi, err := os.Stat(s.root)
		if err != nil {
			return Input{}, fmt.Errorf("input folder: %w", err)
		}
		if !fi.IsDir() {
			return Input{}, fmt.Errorf("input folder %s is not a folder", s.root)
		}
		for _, ex := range s.exclude {
			if fi, err := os.Stat(ex); err == nil {
				s.skip = append(s.skip, fi)
			}
		}
		l, err := s.list("")
		if err != nil {
			return Input{}, fmt.Errorf("input folder: %w", err)
		}
		s.stack = append(s.stack, l)
	}
	for len(s.stack) > 0 {
		if err := ctx.Err(); err != nil {
			return Input{}, err
		}
		top := s.stack[len(s.stack)-1]
		if top.i >= len(top.entries) {
			s.stack = s.stack[:len(s.stack)-1]
			continue
		}
		e := top.entries[top.i]
		top.i++
		rel := path.Join(top.rel, e.name)
		if !e.dir {
			in := Input{Name: rel, Path: filepath.Join(s.root, filepath.FromSlash(rel)), OutStem: path.Join(top.rel, e.outStem)}
			if e.err != nil {
				in.Err = e.err
			}
			return in, nil
		}
		if s.excluded(rel) {
			continue
		}
		l, err := s.list(rel)
		if err != nil {
			return Input{Name: rel + "/", Err: fmt.Errorf("list: %w", pathless(err))}, nil
		}
		s.stack = append(s.stack, l)
	}
	return Input{}, io.EOF
}

func (s *folderSource) excluded(rel string) bool {
	if len(s.skip) == 0 {
		return false
	}
	fi, err := os.Stat(filepath.Join(s.root, filepath.FromSlash(rel)))
	if err != nil {
		return false
	}
	for _, ex := range s.skip {
		if os.SameFile(fi, ex) {
			return true
		}
	}
	return false
}

// list reads one folder and works out its image files' output stems.
func (s *folderSource) list(rel string) (*dirList, error) {
	des, err := os.ReadDir(filepath.Join(s.root, filepath.FromSlash(rel)))
	if err != nil {
		return nil, err
	}
	l := &dirList{rel: rel}
	for _, de := range des {
		name := de.Name()
		switch t := de.Type(); {
		case t.IsDir():
			l.entries = append(l.entries, dirEntry{name: name, dir: true})
			continue
		case t&fs.ModeSymlink != 0:
			// Follow links to files only: a link to a folder could make a cycle.
			fi, err := os.Stat(filepath.Join(s.root, filepath.FromSlash(rel), name))
			if err != nil || !fi.Mode().IsRegular() {
				continue
			}
		case !t.IsRegular():
			continue
		}
		if !s.sel.Takes(path.Join(rel, name)) {
			continue
		}
		l.entries = append(l.entries, dirEntry{name: name})
	}
	var files []*dirEntry
	for i := range l.entries {
		if !l.entries[i].dir {
			files = append(files, &l.entries[i])
		}
	}
	assignStems(rel, files)
	return l, nil
}

// assignStems sets the output stems of the files of one folder (rel) by the clash rule, and
// the error of each file whose output name is already another's.
func assignStems(rel string, files []*dirEntry) {
	stems := map[string]int{}
	for _, e := range files {
		stems[strings.ToLower(stem(e.name))]++
	}
	owner := map[string]string{}
	for _, e := range files {
		e.outStem = stem(e.name)
		if stems[strings.ToLower(e.outStem)] > 1 {
			e.outStem = e.name
		}
		// Names that differ in case only come from inputs that differ in case only, which
		// coexist only on a case-sensitive file system: compare exactly.
		key := e.outStem
		if first, taken := owner[key]; taken {
			e.err = fmt.Errorf("save: output name %s.* is already that of %s; rename one of them", path.Join(rel, e.outStem), path.Join(rel, first))
			continue
		}
		owner[key] = e.name
	}
}

// stem is a file name without its extension.
func stem(name string) string { return strings.TrimSuffix(name, filepath.Ext(name)) }

// pathless drops the file path from an *fs.PathError: reports name the input already.
func pathless(err error) error {
	var pe *fs.PathError
	if e, ok := err.(*fs.PathError); ok {
		pe = e
		return fmt.Errorf("%s: %w", pe.Op, pe.Err)
	}
	return err
}

// walkLess orders relative slash paths the way Folder yields them: component by component,
// each compared as a string.
func walkLess(a, b string) bool {
	for {
		ah, arest, amore := strings.Cut(a, "/")
		bh, brest, bmore := strings.Cut(b, "/")
		if ah != bh {
			return ah < bh
		}
		if !amore || !bmore {
			return !amore && bmore
		}
		a, b = arest, brest
	}
}
