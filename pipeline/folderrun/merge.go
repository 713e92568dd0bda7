package folderrun

import (
	"bytes"
	"io"
	"os"

	"github.com/imgpipe/imgpipe/fsguard"
	"github.com/imgpipe/imgpipe/pipeline"
)

// MaxMergeBytes bounds the reports MergeReports reads, all together: it holds their lines
// in memory to put them in walk order (pipeline.MaxListedFiles lines of ~400 bytes).
const MaxMergeBytes = 4 << 30

// MergeReports merges the shards' reports at names (see pipeline.MergeReports) and writes
// the result to out, atomically, or to stdout when out is "". Every report must be a
// regular file (a FIFO or a device would hang the merge or never end), and they are read
// at most MaxMergeBytes in all; out must not be one of them, nor a link, a FIFO, a device
// or a folder. A report that cannot be read or does not merge, and a bad out, are a
// *RequestError, before anything is written; a write that fails is a *RunError.
func MergeReports(names []string, out string, stdout io.Writer) error {
	if out != "" {
		if err := fsguard.CheckTarget(out); err != nil {
			return badf("report merge: -o %s: %v", out, err)
		}
	}
	rs := make([]io.Reader, len(names))
	left := int64(MaxMergeBytes)
	for i, n := range names {
		f, fi, err := fsguard.Open(n, fsguard.FollowLinks)
		if err != nil {
			return badf("%v", err)
		}
		defer f.Close()
		if out != "" {
			if ofi, err := os.Stat(out); err == nil && os.SameFile(fi, ofi) {
				return badf("report merge: -o %s is the report %s being merged; write the merged report elsewhere", out, n)
			}
		}
		if left -= fi.Size(); left < 0 {
			return badf("report merge: the reports are over %d bytes in all", int64(MaxMergeBytes))
		}
		rs[i] = io.LimitReader(f, fi.Size()) // what was stat'ed: a report still written to does not run on
	}
	// Merged in memory first, so that a report that does not merge leaves no output.
	var b bytes.Buffer
	if _, err := pipeline.MergeReports(&b, names, rs...); err != nil {
		return badf("report merge: %v", err)
	}
	if out == "" {
		_, err := stdout.Write(b.Bytes())
		return err
	}
	if err := WriteFile(out, func(w io.Writer) error { _, err := w.Write(b.Bytes()); return err }); err != nil {
		return failf("report merge: %v", err)
	}
	return nil
}
