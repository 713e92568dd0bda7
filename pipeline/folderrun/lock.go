package folderrun

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/imgpipe/imgpipe/fsguard"
	"github.com/imgpipe/imgpipe/stages"
)

// RunInfoName is the file a run writes into the folder it locks, saying who holds it, so
// that a refused run can name the other one. It is removed when the run ends; one left by
// a killed run is overwritten by the next.
const RunInfoName = ".imgpipe-run"

// maxRunInfoBytes bounds the note read back to name the run holding a folder: a pid, a
// time and a command line.
const maxRunInfoBytes = 64 << 10

// Lock is a run's advisory lock (flock) on the folder it writes into.
type Lock struct {
	dir *os.File
}

// LockFolder takes the lock on dir without waiting: two runs into one output folder would
// take each other's temporary files and clobber each other's report, so the second is
// refused at once with a message naming the first. The lock goes with the process, so a
// killed run never leaves the folder locked.
func LockFolder(dir string) (*Lock, error) {
	d, err := os.OpenFile(dir, os.O_RDONLY|syscall.O_DIRECTORY, 0)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(d.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		d.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			who := "another imgpipe run"
			if b, err := fsguard.ReadFile(filepath.Join(dir, RunInfoName), fsguard.NoLinks, maxRunInfoBytes); err == nil && len(b) > 0 {
				who += " (" + strings.TrimSpace(string(b)) + ")"
			}
			return nil, fmt.Errorf("%s is writing into %s; wait for it to end, or choose another output folder", who, dir)
		}
		return nil, fmt.Errorf("locking %s: %w", dir, err)
	}
	info := fmt.Sprintf("pid %d, started %s: %s", os.Getpid(), time.Now().Format(time.DateTime), strings.Join(os.Args, " "))
	// Only informative: a folder where it cannot be written still works (the outputs
	// would fail there too, each with its reason). Written atomically through the folder,
	// so that a link or a FIFO left at its name is replaced, never followed or waited on.
	if root, err := os.OpenRoot(dir); err == nil {
		_ = stages.WriteFileAtomicIn(root, RunInfoName, func(w io.Writer) error {
			_, err := io.WriteString(w, info+"\n")
			return err
		})
		root.Close()
	}
	return &Lock{dir: d}, nil
}

// Unlock removes the run's note and releases the lock; a nil Lock does nothing.
func (l *Lock) Unlock() {
	if l == nil {
		return
	}
	os.Remove(filepath.Join(l.dir.Name(), RunInfoName))
	l.dir.Close() // closing the descriptor releases the flock
}
