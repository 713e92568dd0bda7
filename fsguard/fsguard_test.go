package fsguard

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// Open takes regular files only, opens none of the others (a FIFO without a writer
// included: the call returns at once), and refuses links where asked to.
func TestOpen(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	if err := os.WriteFile(file, []byte("data"), 0o644); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(file, link); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		path   string
		follow Follow
		want   string // "" for a file opened
	}{
		{file, NoLinks, ""},
		{link, FollowLinks, ""},
		{link, NoLinks, "a symbolic link"},
		{fifo, FollowLinks, "a named pipe"},
		{"/dev/zero", FollowLinks, "a device"},
		{dir, FollowLinks, "a folder"},
		{filepath.Join(dir, "none"), FollowLinks, "no such file"},
	}
	for _, tt := range tests {
		f, fi, err := Open(tt.path, tt.follow)
		if tt.want == "" {
			if err != nil || fi.Size() != 4 {
				t.Errorf("%s: %v", tt.path, err)
			}
			if f != nil {
				f.Close()
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s (follow %v): %v, want %q", tt.path, tt.follow, err, tt.want)
		}
		if strings.HasPrefix(tt.want, "a ") && !errors.Is(err, ErrNotRegular) {
			t.Errorf("%s: %v is not ErrNotRegular", tt.path, err)
		}
	}
}

// ReadFile refuses a file over its limit before reading; ReadAll and Bounded stop an
// endless stream at theirs, and let one that ends exactly there through.
func TestLimits(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	if err := os.WriteFile(file, []byte("12345"), 0o644); err != nil {
		t.Fatal(err)
	}
	if b, err := ReadFile(file, NoLinks, 5); err != nil || string(b) != "12345" {
		t.Errorf("at the limit: %q, %v", b, err)
	}
	if _, err := ReadFile(file, NoLinks, 4); !errors.Is(err, ErrTooLarge) {
		t.Errorf("over the limit: %v", err)
	}
	if _, err := ReadFile("/dev/zero", FollowLinks, 1<<20); !errors.Is(err, ErrNotRegular) {
		t.Errorf("a device: %v", err)
	}
	zero, err := os.Open("/dev/zero")
	if err != nil {
		t.Fatal(err)
	}
	defer zero.Close()
	if _, err := ReadAll(zero, 1<<20); !errors.Is(err, ErrTooLarge) {
		t.Errorf("an endless stream: %v", err)
	}
	if _, err := io.ReadAll(Bounded(zero, 1<<20)); !errors.Is(err, ErrTooLarge) {
		t.Errorf("an endless stream, bounded: %v", err)
	}
	if b, err := io.ReadAll(Bounded(bytes.NewReader([]byte("abc")), 3)); err != nil || string(b) != "abc" {
		t.Errorf("a stream of exactly the limit: %q, %v", b, err)
	}
}

// CheckTarget lets a new or regular file be written, nothing else.
func TestCheckTarget(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(file, link); err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]string{
		file: "", filepath.Join(dir, "new"): "", link: "a symbolic link", dir: "a folder", "/dev/null": "a device",
	} {
		err := CheckTarget(p)
		if want == "" && err != nil || want != "" && (err == nil || !strings.Contains(err.Error(), want)) {
			t.Errorf("%s: %v, want %q", p, err, want)
		}
	}
}

func TestKind(t *testing.T) {
	for m, want := range map[fs.FileMode]string{
		fs.ModeSymlink: "a symbolic link", fs.ModeDir: "a folder", fs.ModeNamedPipe: "a named pipe",
		fs.ModeSocket: "a socket", fs.ModeDevice | fs.ModeCharDevice: "a device",
	} {
		if got := Kind(m); got != want {
			t.Errorf("Kind(%v) = %q, want %q", m, got, want)
		}
	}
}

// MachineFault tells the machine's faults (full, read-only, forbidden) from a file's own.
func TestMachineFault(t *testing.T) {
	for err, want := range map[error]bool{
		&fs.PathError{Op: "write", Path: "x", Err: syscall.ENOSPC}: true,
		fmt.Errorf("save: %w", syscall.EROFS):                      true,
		syscall.EACCES:                                             true,
		&fs.PathError{Op: "open", Path: "x", Err: syscall.ENOENT}:  false,
		ErrNotRegular:                       false,
		errors.New("png: invalid format"):   false,
		fmt.Errorf("w: %w", syscall.EINVAL): false,
		nil:                                 false,
	} {
		if got := MachineFault(err); got != want {
			t.Errorf("MachineFault(%v) = %v, want %v", err, got, want)
		}
	}
}
