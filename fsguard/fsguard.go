// Package fsguard is how imgpipe opens and reads the files a user names or a run keeps
// (inputs, lists, jobs, kernel sources, reports and journals, the lock note), so that no
// read can hang or grow without bound: a file is opened without blocking (O_NONBLOCK: a
// FIFO with no writer does not wait for one), its type is checked on the opened
// descriptor (a regular file is required: no FIFO, device, socket or folder is read), a
// run's own bookkeeping is opened without following a link (O_NOFOLLOW), and a whole-file
// read stops at the caller's limit with an error instead of reading on. Writes go through
// stages.WriteFileAtomicIn, which follows no link and replaces files atomically.
package fsguard

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
)

// ErrNotRegular is returned (wrapped, saying what the file is) for a path that is not a
// regular file where one is expected.
var ErrNotRegular = errors.New("not a regular file")

// ErrTooLarge is returned (wrapped, with the limit) for a read that would go past its
// limit.
var ErrTooLarge = errors.New("over the size limit")

// Follow says whether Open follows a symbolic link at the path itself.
type Follow bool

const (
	// FollowLinks opens what a link names: for files the user names (a job, a list's
	// inputs, a kernel source), where a link is the user's own choice.
	FollowLinks Follow = true
	// NoLinks refuses a link: for the files a run keeps itself (its journal and lock
	// note), where a link can only be planted, to lead a read or write elsewhere.
	NoLinks Follow = false
)

// Open opens path for reading and returns it with its FileInfo when it is a regular file,
// without ever blocking on the open (see the package doc). Anything else is an error
// wrapping ErrNotRegular that says what it is; with NoLinks, a link is refused too.
func Open(path string, follow Follow) (*os.File, fs.FileInfo, error) {
	flags := os.O_RDONLY | syscall.O_NONBLOCK
	if follow == NoLinks {
		flags |= syscall.O_NOFOLLOW
	}
	f, err := os.OpenFile(path, flags, 0)
	if err != nil {
		if follow == NoLinks && errors.Is(err, syscall.ELOOP) {
			return nil, nil, &fs.PathError{Op: "open", Path: path, Err: fmt.Errorf("%w: a symbolic link", ErrNotRegular)}
		}
		return nil, nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, nil, &fs.PathError{Op: "open", Path: path, Err: fmt.Errorf("%w: %s", ErrNotRegular, Kind(fi.Mode()))}
	}
	return f, fi, nil
}

// ReadFile reads the regular file at path whole (see Open), refusing one over limit bytes
// before reading it, and stopping at limit should it grow meanwhile.
func ReadFile(path string, follow Follow, limit int64) ([]byte, error) {
	f, fi, err := Open(path, follow)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if fi.Size() > limit {
		return nil, &fs.PathError{Op: "read", Path: path, Err: fmt.Errorf("%w: %d bytes, at most %d", ErrTooLarge, fi.Size(), limit)}
	}
	b, err := ReadAll(f, limit)
	if err != nil {
		return nil, &fs.PathError{Op: "read", Path: path, Err: err}
	}
	return b, nil
}

// ReadAll reads r to its end, at most limit bytes: a stream that goes on (endless
// stdin) is an error wrapping ErrTooLarge once limit bytes are read.
func ReadAll(r io.Reader, limit int64) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%w: more than %d bytes", ErrTooLarge, limit)
	}
	return b, nil
}

// Bounded returns a reader of r that fails with an error wrapping ErrTooLarge once
// more than limit bytes were asked of it, instead of reading on: for streams read line by
// line (a list of paths on stdin, a report), which must not go on forever.
func Bounded(r io.Reader, limit int64) io.Reader { return &bounded{r: r, left: limit, limit: limit} }

type bounded struct {
	r     io.Reader
	left  int64
	limit int64
}

func (b *bounded) Read(p []byte) (int, error) {
	if b.left <= 0 {
		// One byte more tells a stream that ends exactly at the limit from one that goes on.
		var one [1]byte
		if n, err := b.r.Read(one[:]); n == 0 {
			return 0, err
		}
		return 0, fmt.Errorf("%w: more than %d bytes", ErrTooLarge, b.limit)
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.r.Read(p)
	b.left -= int64(n)
	return n, err
}

// CheckTarget checks a path that a run is to write (replace) as a whole file: it is not
// there yet, or is a regular file; never a link (the write would replace it or be led
// elsewhere), a FIFO (the write would wait for a reader), a device or a folder. The error
// says what is there.
func CheckTarget(path string) error {
	fi, err := os.Lstat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return err
	case !fi.Mode().IsRegular():
		return fmt.Errorf("exists and is %s, not a regular file; name a new file", Kind(fi.Mode()))
	}
	return nil
}

// Kind names the type of a file that is not a regular one, for messages: "a symbolic
// link", "a folder", "a named pipe", "a socket", "a device".
func Kind(m fs.FileMode) string {
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

// machineErrnos are the errors that say the machine, not the file, is at fault: its disk
// is full, read-only or failing, it may not read or write there, it is out of descriptors
// or memory. Another machine may well do the same work.
var machineErrnos = []syscall.Errno{
	syscall.ENOSPC, syscall.EDQUOT, syscall.EROFS, syscall.EIO, syscall.EACCES, syscall.EPERM,
	syscall.EMFILE, syscall.ENFILE, syscall.ENOMEM, syscall.ENODEV, syscall.ENXIO, syscall.ESTALE,
}

// MachineFault reports whether err (wrapped at any depth) is a fault of the machine that
// met it rather than of the file it was reading or writing (see machineErrnos): a missing
// file, a FIFO or a corrupt image are the file's; a full disk is the machine's.
func MachineFault(err error) bool {
	var errno syscall.Errno
	if !errors.As(err, &errno) {
		return false
	}
	for _, e := range machineErrnos {
		if errno == e {
			return true
		}
	}
	return false
}
