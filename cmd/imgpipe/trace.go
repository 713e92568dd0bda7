package main

import (
	"io"

	"github.com/imgpipe/imgpipe/cudastage/sched"
	"github.com/imgpipe/imgpipe/stages"
)

// newTrace starts the --trace timeline of a run. The timeline is Chrome trace-event JSON
// (Perfetto, chrome://tracing): on the CPU a track per worker with a span per stage per
// image; on a GPU a track per decode and save worker and one per stream with each batch's
// H2D, kernels and D2H, timed by device events. It is sched.Trace, the one trace writer of
// the project: spans are kept in memory (bounded; a cut trace says so). Its path was
// checked with the report's before the run (checkWriteTargets).
func newTrace() *sched.Trace { return sched.NewTrace("imgpipe", 0) }

// writeTrace writes the timeline to path, atomically (an interrupted run still leaves a
// whole trace), or to stdout for "-". A trace that cannot be written fails the run (exit
// 3): asked for, it must not silently be missing.
func writeTrace(tr *sched.Trace, path string, stdout io.Writer) error {
	if path == stdoutPath {
		return tr.WriteJSON(stdout)
	}
	return stages.WriteFileAtomic(path, tr.WriteJSON)
}
