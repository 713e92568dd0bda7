package stages

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// TempMarker is part of every temporary file name WriteFileAtomic uses
// ("." + base name + TempMarker + random digits), so that RemoveTemps can
// recognise the leftovers of a process killed mid-write (SIGKILL, a second
// Ctrl-C, a crash), which its own cleanup never got to remove.
const TempMarker = ".tmp"

// IsTempName reports whether a file name (no folder) has exactly the form of
// WriteFileAtomic's temporary files: ".", a base name of 1 to 200 bytes,
// TempMarker, then the decimal digits os.CreateTemp puts for its "*" (a
// uint32: 1 to 10 digits). Being strict keeps user files such as ".a.tmp" or
// ".notes.tmp.bak" out of any cleanup.
func IsTempName(name string) bool {
	if len(name) < 2 || name[0] != '.' {
		return false
	}
	i := strings.LastIndex(name, TempMarker)
	if i < 2 || i-1 > maxTempBase { // base = name[1:i], 1..maxTempBase bytes
		return false
	}
	digits := name[i+len(TempMarker):]
	if len(digits) < 1 || len(digits) > 10 {
		return false
	}
	for _, c := range digits {
		if c < '0' || c > '9' {
			return false
		}
	}
	n, err := strconv.ParseUint(digits, 10, 64)
	return err == nil && n <= math.MaxUint32
}

// RemoveTemps removes, under dir and its subfolders, the regular files whose
// names match IsTempName, and returns how many it removed. Links are not
// followed. A missing dir is not an error (nothing to clean). It must not run
// while another process writes into dir, whose temporary files it would take.
func RemoveTemps(dir string) (int, error) {
	n := 0
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == dir && errors.Is(err, fs.ErrNotExist) {
				return fs.SkipAll
			}
			return err
		}
		if !d.Type().IsRegular() || !IsTempName(d.Name()) {
			return nil
		}
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		n++
		return nil
	})
	return n, err
}

// maxTempBase bounds the part of the base name copied into the temporary
// name, keeping it under the usual 255-byte name limit.
const maxTempBase = 200

// RemoveTempsOf removes the temporary files WriteFileAtomic left beside path
// for path itself (writes of path killed midway), and returns how many it
// removed. Only regular files whose names match IsTempName and start with
// path's temporary prefix go. A missing folder is not an error.
func RemoveTempsOf(path string) (int, error) {
	dir, base := filepath.Split(path)
	if base == "" {
		return 0, nil
	}
	if dir == "" {
		dir = "."
	}
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	prefix := tempPrefix(base)
	n := 0
	for _, e := range ents {
		if e.Type().IsRegular() && IsTempName(e.Name()) && strings.HasPrefix(e.Name(), prefix) {
			if err := os.Remove(filepath.Join(dir, e.Name())); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return n, err
			}
			n++
		}
	}
	return n, nil
}

// WriteFileAtomic writes path through a temporary file in the same folder,
// fsyncs it and renames it, so that path holds either its old content or the
// whole new content, never a part. Parent folders are created as needed.
// On any error the temporary file is removed and an existing path is left
// untouched. The new file gets mode 0644.
func WriteFileAtomic(path string, write func(io.Writer) error) error {
	dir, base := filepath.Split(path)
	if base == "" {
		return errors.New("write: path names a folder")
	}
	if dir == "" {
		dir = "."
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, tempPrefix(base)+"*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	renamed := false
	defer func() {
		if !renamed { // also when write panics: no temporary file is left behind
			os.Remove(tmp)
		}
	}()
	if err := writeClose(f, write, true); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	renamed = true
	// The rename is durable only once the folder is synced.
	return SyncDir(dir)
}

// tempPrefix is the start of the temporary names of writes of base.
func tempPrefix(base string) string {
	if len(base) > maxTempBase {
		base = base[:maxTempBase]
	}
	return "." + base + TempMarker
}

// writeClose writes f through a buffer, gives it mode 0644, fsyncs it when
// sync is set, and closes it. It closes f on error too.
func writeClose(f *os.File, write func(io.Writer) error, sync bool) (err error) {
	defer func() {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}()
	bw := bufio.NewWriterSize(f, 256<<10)
	if err := write(bw); err != nil {
		return err
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	if err := f.Chmod(0o644); err != nil {
		return err
	}
	if sync {
		return f.Sync()
	}
	return nil
}

// ErrLinkInOutput is returned (wrapped, naming the folder) by WriteFileAtomicIn
// when a folder on the way to the file is a symbolic link.
var ErrLinkInOutput = errors.New("is a symbolic link; outputs never go through links inside the output folder")

// WriteFileAtomicIn is WriteFileAtomic for name, a slash-separated path
// relative to root, with the guarantee that the file lands inside root: every
// folder on the way is checked without following links (a link is refused
// with ErrLinkInOutput, even one that points inside root, since its outputs
// could then land on another input's) and missing ones are created; os.Root
// refuses anything that would still resolve outside root (a link swapped in
// between the check and the write). An existing file or link at name itself
// is replaced, never followed. It is StageIn then CommitIn of that one file.
func WriteFileAtomicIn(root *os.Root, name string, write func(io.Writer) error) error {
	s, err := StageIn(root, name, write)
	if err != nil {
		return err
	}
	return CommitIn(root, []Staged{s})[0]
}

// Staged is a file written by StageIn into a temporary file beside its
// final name, neither durable nor in place yet: CommitIn does both, for many
// files at once, or Discard drops it.
type Staged struct {
	rel, tmp string // the final name and the temporary one, relative to the root
}

// Name is the file's final path relative to the root (OS separators).
func (s Staged) Name() string { return s.rel }

// StageIn writes name (as WriteFileAtomicIn takes it) into a new temporary
// file in its folder under root, with the same checks, and closes it without
// syncing. On error nothing is left behind.
func StageIn(root *os.Root, name string, write func(io.Writer) error) (Staged, error) {
	rel := filepath.Clean(filepath.FromSlash(name))
	if !filepath.IsLocal(rel) {
		return Staged{}, fmt.Errorf("write: %q is not a relative path inside the folder", name)
	}
	dir, base := filepath.Split(rel)
	if base == "" {
		return Staged{}, errors.New("write: path names a folder")
	}
	if err := mkdirNoLinks(root, filepath.Clean(dir)); err != nil {
		return Staged{}, err
	}
	prefix := filepath.Join(dir, tempPrefix(base))
	var f *os.File
	var tmp string
	for try := 0; ; try++ {
		// The digits make the name one IsTempName recognises, as os.CreateTemp's do.
		tmp = prefix + strconv.FormatUint(uint64(rand.Uint32()), 10)
		var err error
		f, err = root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err == nil {
			break
		}
		if !errors.Is(err, fs.ErrExist) || try == 100 {
			return Staged{}, err
		}
	}
	written := false
	defer func() {
		if !written { // also when write panics: no temporary file is left behind
			root.Remove(tmp)
		}
	}()
	if err := writeClose(f, write, false); err != nil {
		return Staged{}, err
	}
	written = true
	return Staged{rel: rel, tmp: tmp}, nil
}

// Discard removes the temporary file of a file that will not be committed.
func (s Staged) Discard(root *os.Root) error {
	err := root.Remove(s.tmp)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}

// CommitIn puts staged files of root in place durably, as WriteFileAtomic
// does one: their content is synced, each is renamed to its name, then the
// renames are synced. A group pays for one sync of the file system where the
// system has syncfs (Linux) instead of two per file, which is what makes a
// folder of small outputs fast on a real disk. It returns one error per file:
// a file whose rename failed is removed; after a failed sync of the content
// none is renamed and every one is removed; a failed sync of the renames
// leaves the files in place and reports the error for each.
func CommitIn(root *os.Root, files []Staged) []error {
	errs := make([]error, len(files))
	fail := func(err error) []error {
		for i, s := range files {
			s.Discard(root)
			errs[i] = err
		}
		return errs
	}
	fsWide := len(files) > 1
	if fsWide {
		ok, err := syncFSOf(root)
		if err != nil {
			return fail(err)
		}
		fsWide = ok
	}
	if !fsWide {
		for _, s := range files {
			if err := syncFileIn(root, s.tmp); err != nil {
				return fail(err)
			}
		}
	}
	dirs := map[string]bool{}
	for i, s := range files {
		if err := root.Rename(s.tmp, s.rel); err != nil {
			s.Discard(root)
			errs[i] = err
			continue
		}
		dirs[filepath.Dir(s.rel)] = true
	}
	// The renames are durable only once their folders are synced.
	var err error
	if fsWide {
		_, err = syncFSOf(root)
	} else {
		for d := range dirs {
			err = errors.Join(err, syncRootDir(root, d))
		}
	}
	if err != nil {
		for i := range errs {
			if errs[i] == nil {
				errs[i] = err
			}
		}
	}
	return errs
}

// syncFileIn fsyncs the file name of root.
func syncFileIn(root *os.Root, name string) error {
	f, err := root.OpenFile(name, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	return errors.Join(f.Sync(), f.Close())
}

// syncFSOf syncs the whole file system of root's folder, where the system
// can (syncfs); ok false means it cannot, and the caller syncs file by file.
func syncFSOf(root *os.Root) (ok bool, err error) {
	d, err := root.Open(".")
	if err != nil {
		return false, err
	}
	defer d.Close()
	return syncFS(d)
}

// mkdirNoLinks makes sure every folder of dir (relative to root) exists and is
// a real folder, not a link, creating the missing ones.
func mkdirNoLinks(root *os.Root, dir string) error {
	if dir == "." {
		return nil
	}
	p := ""
	for _, part := range strings.Split(dir, string(filepath.Separator)) {
		p = filepath.Join(p, part)
		fi, err := root.Lstat(p)
		if errors.Is(err, fs.ErrNotExist) {
			if err = root.Mkdir(p, 0o755); err == nil || errors.Is(err, fs.ErrExist) {
				fi, err = root.Lstat(p) // made now, or by a concurrent writer
			}
		}
		switch {
		case err != nil:
			return err
		case fi.Mode()&fs.ModeSymlink != 0:
			return fmt.Errorf("%s %w", filepath.ToSlash(p), ErrLinkInOutput)
		case !fi.IsDir():
			return fmt.Errorf("%s is not a folder", filepath.ToSlash(p))
		}
	}
	return nil
}

// syncRootDir fsyncs the folder dir of root, as SyncDir does.
func syncRootDir(root *os.Root, dir string) error {
	d, err := root.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return ignoreSyncUnsupported(d.Sync())
}

// SyncDir fsyncs a folder, making renames and creations in it durable. Filesystems that cannot sync folders (EINVAL,
// ENOTSUP) are not an error: there is nothing more we could do on them.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return ignoreSyncUnsupported(d.Sync())
}

// ignoreSyncUnsupported drops the errors of file systems that cannot sync
// folders (EINVAL, ENOTSUP): there is nothing more we could do on them.
func ignoreSyncUnsupported(err error) error {
	if errors.Is(err, syscall.EINVAL) || errors.Is(err, syscall.ENOTSUP) {
		return nil
	}
	return err
}
