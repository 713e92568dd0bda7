package stages

import (
	"bufio"
	"errors"
	"io"
	"io/fs"
	"math"
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
	if len(base) > maxTempBase {
		base = base[:maxTempBase]
	}
	prefix := "." + base + TempMarker
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
	if len(base) > maxTempBase {
		base = base[:maxTempBase]
	}
	f, err := os.CreateTemp(dir, "."+base+TempMarker+"*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	renamed := false
	defer func() {
		// Also runs when write panics: no temporary file is left behind.
		if !renamed {
			f.Close()
			os.Remove(tmp)
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
	if err := f.Sync(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	renamed = true
	// The rename is durable only once the folder is synced. From here on the
	// file is in place, so a failure is reported but nothing is removed.
	return syncDir(dir)
}

// syncDir fsyncs a folder. Filesystems that cannot sync folders (EINVAL,
// ENOTSUP) are not an error: there is nothing more we could do on them.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOTSUP) {
		return err
	}
	return nil
}
