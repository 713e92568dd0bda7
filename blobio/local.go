package blobio

import (
	"errors"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/imgpipe/imgpipe/fsguard"
	"github.com/imgpipe/imgpipe/stages"
)

// LocalDir is the folder of a file:// bucket URL, for the checks a folder gets (see
// localDir); ok is false for other locations.
func LocalDir(loc string) (dir string, ok bool) { return localDir(loc) }

// localDir is the folder of a file:// bucket URL (its prefix parameter, a folder, joined
// on), so that its objects are read and written with the local file system's guards, as
// a folder's files are: no FIFO or device opened, no link followed on the way to an
// output, every write atomic and inside the folder. ok is false for other URLs, and for a
// prefix that is not a folder ("photos/2024-", which fileblob matches on key prefixes).
func localDir(loc string) (dir string, ok bool) {
	u, err := url.Parse(loc)
	if err != nil || u.Scheme != "file" {
		return "", false
	}
	p := u.Path
	if u.Host == "." { // file://./rel: a relative path, as fileblob reads it
		p = strings.TrimPrefix(p, "/")
	}
	prefix := u.Query().Get("prefix")
	if prefix != "" && !strings.HasSuffix(prefix, "/") {
		return "", false
	}
	return filepath.Join(filepath.FromSlash(p), filepath.FromSlash(prefix)), true
}

// openLocal opens the object name of the file:// bucket in dir for reading: a regular file
// (a link to one is followed, as in a folder walk), never a FIFO or device.
func openLocal(dir, name string) (io.ReadCloser, int64, error) {
	f, fi, err := fsguard.Open(filepath.Join(dir, filepath.FromSlash(name)), fsguard.FollowLinks)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, 0, errors.New("open: no such object")
	case errors.Is(err, fsguard.ErrNotRegular):
		return nil, 0, errors.New("not a regular file")
	case err != nil:
		return nil, 0, err
	}
	return f, fi.Size(), nil
}

// putLocal writes the object name of the file:// bucket in dir as an output is written
// into a folder (stages.WriteFileAtomicIn): atomically, inside dir, through no link.
func putLocal(dir, name string, write func(io.Writer) error) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	return stages.WriteFileAtomicIn(root, name, write)
}

// copyLocal copies the object name of the file:// bucket in dir into w (see CopyObject):
// a regular file, not a link (the run's own report).
func copyLocal(dir, name string, w io.Writer) (found bool, err error) {
	f, _, err := fsguard.Open(filepath.Join(dir, filepath.FromSlash(name)), fsguard.NoLinks)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	defer f.Close()
	_, err = io.Copy(w, f)
	return true, err
}

// ErrStoreFault is wrapped by a bucket driver's errors that are the store's or this
// machine's, not the object's: the store does not answer in time, refuses this machine's
// credentials, is out of room or fails inside.
var ErrStoreFault = errors.New("the store failed")

// MachineFault reports whether err, met reading an input or writing an output, is a fault
// of the machine (or of its way to the store) rather than of the file: a local file
// system's (fsguard.MachineFault), or a store's (ErrStoreFault). Another worker may do the
// same task.
func MachineFault(err error) bool {
	return fsguard.MachineFault(err) || errors.Is(err, ErrStoreFault)
}
