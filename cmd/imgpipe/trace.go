package main

import (
	"os"
	"path/filepath"

	"github.com/imgpipe/imgpipe/cudastage/sched"
)

// openTrace starts the --trace timeline of a run, checking first that the folder of path
// exists, so that a typo fails before the run rather than after it; nil for no path. The
// timeline is Chrome trace-event JSON (Perfetto, chrome://tracing): on the CPU a track per
// worker with a span per stage per image; on a GPU a track per decode and save worker and
// one per stream with each batch's H2D, kernels and D2H, timed by device events. It is
// sched.Trace, the one trace writer of the project: spans are kept in memory (bounded; a cut
// trace says so) and the file is written atomically at the end (WriteFile), so an
// interrupted run still leaves a whole trace.
func openTrace(path string) (*sched.Trace, error) {
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
	return sched.NewTrace("imgpipe", 0), nil
}
