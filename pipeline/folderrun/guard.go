package folderrun

import (
	"io"
	"os"
	"path/filepath"

	"github.com/imgpipe/imgpipe/blobio"
	"github.com/imgpipe/imgpipe/fsguard"
	"github.com/imgpipe/imgpipe/stages"
)

// writeProbeName is the file a run creates and removes in its output folder before it
// takes any input, to learn whether it can write there at all. Its temporary name is one
// that stages.RemoveTemps takes, should the run be killed in between.
const writeProbeName = ".imgpipe-write-check"

// checkWritable stops a run that cannot write into its output folder at all (read-only,
// not ours) before any work, instead of failing every input one by one.
func checkWritable(dir string) error {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	s, err := stages.StageIn(root, writeProbeName, func(io.Writer) error { return nil })
	if err != nil {
		return err
	}
	return s.Discard(root)
}

// WriteFile writes a whole file that a run or a command names (a report, a trace, a merged
// report) atomically, as WriteFileAtomic does, after fsguard.CheckTarget: an existing link,
// FIFO, device or folder there is refused, not replaced or written through. It is how the
// queue's wait writes its report, so that a report of any route obeys the same rules.
func WriteFile(path string, write func(io.Writer) error) error {
	if err := fsguard.CheckTarget(path); err != nil {
		return err
	}
	return stages.WriteFileAtomic(path, write)
}

// localOutput is the local folder of an output: the folder, or a file:// bucket's; "" for
// none or another bucket.
func localOutput(out string) string {
	if dir, ok := blobio.LocalDir(out); ok {
		return dir
	}
	if blobio.IsURL(out) {
		return ""
	}
	return out
}

// checkListed checks a list of inputs read from stdin as CheckPaths checks a folder or a
// file (it could not see them before they were read): no listed file lies inside the
// output folder, where an output could overwrite it, and none is the report or the trace,
// which would replace it.
func checkListed(r *Request, paths []string) error {
	var out os.FileInfo
	if r.Output != "" && !blobio.IsURL(r.Output) {
		out, _ = os.Stat(r.Output) // not made yet: compared by path
	}
	var targets []string
	for _, t := range []string{r.ReportPath(), r.Exec.Trace} {
		if t != "" && t != StdoutPath && !blobio.IsURL(t) {
			targets = append(targets, t)
		}
	}
	inOut := map[string]bool{} // by folder: a list names many files of few folders
	for _, p := range paths {
		dir := filepath.Dir(p)
		if r.Output != "" && !blobio.IsURL(r.Output) {
			in, seen := inOut[dir]
			if !seen {
				in = within(dir, r.Output, out)
				inOut[dir] = in
			}
			if in {
				return badf("-i -: %s lies inside the output folder %s, where its output could overwrite it; choose an output folder outside the listed files", p, r.Output)
			}
		}
		for _, t := range targets {
			if filepath.Base(t) == filepath.Base(p) && samePath(t, p) {
				return badf("-i -: %s is listed as an input and named as the report or trace, which would replace it; write it elsewhere", p)
			}
		}
	}
	return nil
}
