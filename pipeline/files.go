package pipeline

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/imgpipe/imgpipe/fsguard"
)

// MaxListedFiles bounds the lines ReadFileList reads (empty ones included, so that an
// endless stream of newlines ends too), checked as it reads, so that a runaway producer
// cannot exhaust memory with names (a path takes ~100 bytes: 10 M paths are about 1 GB).
const MaxListedFiles = 10_000_000

// MaxFileListBytes bounds the bytes ReadFileList reads: MaxListedFiles paths of ~100 bytes.
const MaxFileListBytes = 1 << 30

// maxListLine bounds one line of a file list: far above any file system's PATH_MAX.
const maxListLine = 64 << 10

// ReadFileList reads a list of file paths, one a line, as `imgpipe run -i -` takes them on
// stdin: a trailing '\r' is dropped (lists made on Windows), empty lines are skipped, and
// nothing else is interpreted (spaces and quotes are part of the name). A line holding a
// NUL byte is an error: such a list (find -print0) is read by ReadNullList. A list of more
// than MaxListedFiles lines or MaxFileListBytes bytes is an error, found as it is read.
func ReadFileList(r io.Reader) ([]string, error) { return readList(r, false) }

// ReadNullList reads a list of file paths each ended by a NUL byte, as `find -print0` writes
// them and `xargs -0` reads them (`imgpipe run -i - -0`): a name is taken byte for byte,
// newlines included; empty names are skipped. Its bounds are ReadFileList's.
func ReadNullList(r io.Reader) ([]string, error) { return readList(r, true) }

func readList(r io.Reader, null bool) ([]string, error) {
	sc := bufio.NewScanner(fsguard.Bounded(r, MaxFileListBytes))
	sc.Buffer(make([]byte, 4096), maxListLine)
	if null {
		sc.Split(splitNull)
	}
	var paths []string
	for n := 1; sc.Scan(); n++ {
		if n > MaxListedFiles {
			return nil, fmt.Errorf("file list: more than %d lines", MaxListedFiles)
		}
		line := sc.Text()
		if !null {
			line = strings.TrimSuffix(line, "\r")
			if strings.IndexByte(line, 0) >= 0 {
				return nil, fmt.Errorf("file list: line %d holds a NUL byte: for a NUL-separated list (find -print0) give -0/--null", n)
			}
		}
		if line == "" {
			continue
		}
		paths = append(paths, line)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("file list: %w", err)
	}
	return paths, nil
}

// splitNull is a bufio.SplitFunc that cuts at NUL bytes; a last name without one counts.
func splitNull(data []byte, atEOF bool) (int, []byte, error) {
	if i := bytes.IndexByte(data, 0); i >= 0 {
		return i + 1, data[:i], nil
	}
	if atEOF && len(data) > 0 {
		return len(data), data, nil
	}
	return 0, nil, nil
}

// Files returns a source of the listed files (a single file given as -i, or a list read
// with ReadFileList), in the list's order, keeping those sel takes. An input's name, and so
// its output's relative path, is its path relative to the deepest folder that holds every
// listed file: `find /data -name '*.jpg'` gives names relative to /data's deepest common
// folder, and a single file is named by its base name. Output stems follow Folder's clash
// rule among the selected files of each folder. A file listed twice fails the second time
// (the first is processed once); a missing or unreadable file fails when it is read. Each
// input carries its file's size and modification time (for Resume), read as it is yielded.
func Files(paths []string, sel Selection) (Source, error) {
	abs := make([]string, len(paths))
	for i, p := range paths {
		a, err := filepath.Abs(p)
		if err != nil {
			return nil, fmt.Errorf("file list: %s: %w", p, err)
		}
		abs[i] = a
	}
	root := commonFolder(abs)
	var ins []Input
	byFolder := map[string][]*dirEntry{}
	entryOf := map[int]*dirEntry{}
	first := map[string]int{}
	for i, a := range abs {
		rel, err := filepath.Rel(root, a)
		if err != nil {
			return nil, fmt.Errorf("file list: %s: %w", paths[i], err)
		}
		rel = filepath.ToSlash(rel)
		if !sel.Takes(rel) {
			continue
		}
		if sel.ByInfo() {
			if fi, err := os.Stat(paths[i]); err == nil && !sel.TakesInfo(fi.Size(), fi.ModTime()) {
				continue // a file that cannot be read is kept, to fail when it is read
			}
		}
		in := Input{Name: rel, Path: paths[i]}
		if j, dup := first[a]; dup {
			in.Err = fmt.Errorf("listed twice (also as %s, which is processed)", paths[j])
		} else {
			first[a] = i
			dir, name := path.Split(rel)
			e := &dirEntry{name: name}
			byFolder[dir] = append(byFolder[dir], e)
			entryOf[len(ins)] = e
		}
		ins = append(ins, in)
	}
	for dir, files := range byFolder {
		assignStems(strings.TrimSuffix(dir, "/"), files)
	}
	for i, e := range entryOf {
		ins[i].OutStem = path.Join(path.Dir(ins[i].Name), e.outStem)
		ins[i].Err = e.err
	}
	return &statSource{Inputs(ins...)}, nil
}

// statSource gives each input, as it is yielded, its file's size and modification time,
// which the report records for Resume. A file that cannot be stat'ed keeps neither, and
// fails when it is read.
type statSource struct{ Source }

func (s *statSource) Next(ctx context.Context) (Input, error) {
	in, err := s.Source.Next(ctx)
	if err == nil && in.Err == nil && in.Path != "" {
		if fi, err := os.Stat(in.Path); err == nil && fi.Mode().IsRegular() {
			in.Size, in.ModTime = fi.Size(), fi.ModTime()
		}
	}
	return in, err
}

// commonFolder is the deepest folder that holds every one of the absolute, clean paths.
func commonFolder(abs []string) string {
	if len(abs) == 0 {
		return "."
	}
	root := filepath.Dir(abs[0])
	for _, a := range abs[1:] {
		for !within(a, root) {
			root = filepath.Dir(root)
		}
	}
	return root
}

// within reports whether the clean absolute path p lies under the folder dir.
func within(p, dir string) bool {
	rel, err := filepath.Rel(dir, p)
	return err == nil && filepath.IsLocal(rel)
}

// OutputName is the input's output path relative to the output folder for a save format's
// extension ext (without the dot): what the run will write, for a dry run to show.
func (in Input) OutputName(ext string) string { return outputName(in, ext) }
