package pipeline

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"
	"time"
	"unicode"
	"unicode/utf8"
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
// followed; links to folders are not, so a link cycle cannot trap the walk. An entry with an
// image name that is not a regular file (a broken link, a link loop, a link to a folder, a
// FIFO, a device) is never read, so reading never blocks, but it is not left out silently
// either: it is yielded with Input.Err saying why ("walk: broken symbolic link"), so the
// report lists it as failed. Each input carries its file's size and modification time.
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
	size    int64
	modTime time.Time
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
			in := Input{Name: rel, Path: filepath.Join(s.root, filepath.FromSlash(rel)), OutStem: path.Join(top.rel, e.outStem),
				Size: e.size, ModTime: e.modTime, Err: e.err}
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
		if de.IsDir() {
			l.entries = append(l.entries, dirEntry{name: name, dir: true})
			continue
		}
		if !s.sel.Takes(path.Join(rel, name)) {
			continue
		}
		e := dirEntry{name: name}
		fi, err := s.imageInfo(filepath.Join(s.root, filepath.FromSlash(rel), name), de)
		if err != nil {
			// Selected as an image but unreadable as one: reported, never silently left out.
			e.err = fmt.Errorf("walk: %w", err)
		} else if !s.sel.TakesInfo(fi.Size(), fi.ModTime()) {
			continue
		} else {
			e.size, e.modTime = fi.Size(), fi.ModTime()
		}
		l.entries = append(l.entries, e)
	}
	var files []*dirEntry
	for i := range l.entries {
		if e := &l.entries[i]; !e.dir && e.err == nil {
			files = append(files, e)
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
		stems[foldKey(stem(e.name))]++
	}
	owner := map[string]string{}
	for _, e := range files {
		e.outStem = stem(e.name)
		if stems[foldKey(e.outStem)] > 1 {
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

// imageInfo returns the file information of an entry with an image name, following a
// link to a file, or says why it is not a regular file that can be read: a broken link, a
// link loop, a link to a folder (not followed, so that a cycle cannot trap the walk), a
// FIFO or a device (reading one could block).
func (s *folderSource) imageInfo(full string, de fs.DirEntry) (os.FileInfo, error) {
	t := de.Type()
	if t&fs.ModeSymlink == 0 {
		if !t.IsRegular() {
			return nil, fmt.Errorf("not a regular file (%s)", FileKind(t))
		}
		return de.Info()
	}
	fi, err := os.Stat(full)
	switch {
	case errors.Is(err, syscall.ELOOP):
		return nil, errors.New("symbolic link loop")
	case errors.Is(err, fs.ErrNotExist):
		return nil, errors.New("broken symbolic link")
	case err != nil:
		return nil, pathless(err)
	case fi.IsDir():
		return nil, errors.New("symbolic link to a folder (links to folders are not followed)")
	case !fi.Mode().IsRegular():
		return nil, fmt.Errorf("symbolic link to something that is not a regular file (%s)", FileKind(fi.Mode().Type()))
	}
	return fi, nil
}

// FileKind names a file type that is not a regular file ("a symbolic link", "a named
// pipe", ...), for messages: the walk's and the CLI's path checks.
func FileKind(m fs.FileMode) string {
	switch {
	case m&fs.ModeSymlink != 0:
		return "a symbolic link"
	case m.IsDir():
		return "a folder"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeDevice != 0:
		return "a device"
	}
	return "a special file (" + m.Type().String() + ")"
}

// foldKey is name in lower case for comparisons without regard to case. Unlike
// strings.ToLower it keeps bytes that are not UTF-8 as they are, so that two names that
// differ only in such bytes stay different.
func foldKey(name string) string {
	var b strings.Builder
	for i := 0; i < len(name); {
		r, n := utf8.DecodeRuneInString(name[i:])
		if r == utf8.RuneError && n == 1 {
			b.WriteByte(name[i])
		} else {
			b.WriteRune(unicode.ToLower(r))
		}
		i += n
	}
	return b.String()
}

// OutStems applies Folder's name clash rule (assignStems) to the image files of one
// folder: rel is the folder's slash path ("" for the root), names its image files in walk
// order. It returns each file's output stem (its relative path without extension) and, for
// a file whose output name is already taken by an earlier one, the error that fails it.
// Sources of other stores (object storage) use it so that every source names outputs alike.
func OutStems(rel string, names []string) ([]string, []error) {
	entries := make([]dirEntry, len(names))
	files := make([]*dirEntry, len(names))
	for i, n := range names {
		entries[i].name = n
		files[i] = &entries[i]
	}
	assignStems(rel, files)
	stems, errs := make([]string, len(names)), make([]error, len(names))
	for i, e := range entries {
		stems[i], errs[i] = path.Join(rel, e.outStem), e.err
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
