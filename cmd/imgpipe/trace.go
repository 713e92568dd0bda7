package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/imgpipe/imgpipe/cudastage/sched"
)

// traceFile is the --trace output: a Chrome trace-event timeline of the run (Perfetto,
// chrome://tracing). On the CPU it has a track per worker with a span per stage per image;
// on a GPU a track per decode and save worker and one per stream with each batch's H2D,
// kernels and D2H, timed by device events. It is sched.Trace, the one trace writer of the
// project: spans are kept in memory (bounded; a cut trace says so) and the file is written
// atomically at the end, so an interrupted run still leaves a whole trace.
type traceFile struct {
	path string
	t    *sched.Trace
}

// openTrace starts a trace for path, checking first that its folder exists, so that a
// typo fails before the run rather than after it.
func openTrace(path string) (*traceFile, error) {
	if path == "" {
		return nil, nil
	}
	fi, err := os.Stat(filepath.Dir(path))
	if err != nil {
		return nil, fatalError("--trace: %v", err)
	}
	if !fi.IsDir() {
		return nil, fatalError("--trace: %s is not a folder", filepath.Dir(path))
	}
	return &traceFile{path: path, t: sched.NewTrace("imgpipe", 0)}, nil
}

func (t *traceFile) close() error {
	if err := t.t.WriteFile(t.path); err != nil {
		return fmt.Errorf("--trace: %w", err)
	}
	return nil
}
