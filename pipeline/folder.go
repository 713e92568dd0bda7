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

// imageExts are the file extensions taken as images, compared in lower case.
var imageExts = map[string]bool{
	".jpg": true, ".jpeg": true, ".png": true, ".gif": true, ".bmp": true,
	".tif": true, ".tiff": true, ".webp": true,
}

// IsImageName reports whether a file name has one of the image extensions the folder
// source takes: jpg jpeg png gif bmp tif tiff webp, in any case.
func IsImageName(name string) bool {
	return imageExts[strings.ToLower(filepath.Ext(name))]
}

// Folder returns a source that walks dir recursively and yields its image files (by
// extension, see IsImageName) in a deterministic order: each folder's entries sorted by
// name, subfolders walked where they sort. Folders in exclude (typically the output folder,
// when it lies inside the input folder) are not entered. Symbolic links to files are
// followed; links to folders are not, so a link cycle cannot trap the walk. Anything that is
// not a regular file (a FIFO, a device) is ignored, so reading never blocks.
//
// Output names (Input.OutStem) follow the clash rule: a file's output is its relative path
// with the extension replaced by the save format's, except when several image files in one
// folder share a stem (a.jpg, a.png, a.JPG, compared without case): then EACH of them keeps
// its extension before the new one (a.jpg.png, a.png.png, a.JPG.png). The result is
// deterministic and independent of the walk's progress. If a name still collides (with
// a.jpg, a.png and a.png.jpg saved as png, a.png becomes a.png.png because it shares its stem
// with a.jpg, and a.png.jpg, whose stem a.png is unique, becomes a.png.png too), the later
// input fails with an error saying so and nothing is overwritten.
//
// Memory holds one folder listing per level of the current path, not the whole tree.
func Folder(dir string, exclude ...string) Source {
	return &folderSource{root: dir, exclude: exclude}
}

type folderSource struct {
	root    string
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
			in := Input{Name: rel, Path: filepath.Join(s.root, filepath.FromSlash(rel)), OutStem: e.outStem}
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
		if !IsImageName(name) {
			continue
		}
		l.entries = append(l.entries, dirEntry{name: name})
	}
	var names []string
	var files []*dirEntry
	for i := range l.entries {
		if e := &l.entries[i]; !e.dir {
			names, files = append(names, e.name), append(files, e)
		}
	}
	stems, errs := OutStems(rel, names)
	for i, e := range files {
		e.outStem, e.err = stems[i], errs[i]
	}
	return l, nil
}

// OutStems applies Folder's name clash rule to the image files of one folder: rel is the
// folder's slash path ("" for the root), names its image files in walk order. It returns
// each file's output stem (its relative path without extension) and, for a file whose
// output name is already taken by an earlier one, the error that fails it. Sources of
// other stores (object storage) use it so that every source names outputs alike.
func OutStems(rel string, names []string) ([]string, []error) {
	count := map[string]int{}
	for _, n := range names {
		count[strings.ToLower(stem(n))]++
	}
	stems, errs := make([]string, len(names)), make([]error, len(names))
	owner := map[string]string{}
	for i, n := range names {
		st := stem(n)
		if count[strings.ToLower(st)] > 1 {
			st = n
		}
		stems[i] = path.Join(rel, st)
		// Names that differ in case only come from inputs that differ in case only, which
		// coexist only on a case-sensitive store: compare exactly.
		if first, taken := owner[st]; taken {
			errs[i] = fmt.Errorf("save: output name %s.* is already that of %s; rename one of them", path.Join(rel, st), path.Join(rel, first))
			continue
		}
		owner[st] = n
	}
	return stems, errs
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
