package stages

import (
	"bufio"
	"errors"
	"io"
	"os"
	"path/filepath"
	"syscall"
)

// TempMarker is part of every temporary file name WriteFileAtomic uses
// ("." + base name + TempMarker + random digits), so that a cleanup pass
// after a crash can recognise leftovers.
const TempMarker = ".tmp"

// maxTempBase bounds the part of the base name copied into the temporary
// name, keeping it under the usual 255-byte name limit.
const maxTempBase = 200

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
