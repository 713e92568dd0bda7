package stages

import (
	"os"

	"golang.org/x/sys/unix"
)

// syncFS syncs the file system that holds f (syncfs(2)): every file and
// folder written on it becomes durable with one call.
func syncFS(f *os.File) (bool, error) {
	return true, unix.Syncfs(int(f.Fd()))
}
