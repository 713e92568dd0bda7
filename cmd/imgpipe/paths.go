package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/imgpipe/imgpipe/pipeline"
	"github.com/imgpipe/imgpipe/pipeline/job"
)

// stdoutPath is the --report and --trace value that means standard output.
const stdoutPath = "-"

// checkWriteTargets checks the files the run writes beside its outputs (the report and the
// trace) so that neither can clobber anything: each is "-" (standard output) or a path that
//   - is not there yet, or is a regular file: never a link (it would be replaced by a
//     file, or lead the write elsewhere), a FIFO (its reader would hang), a device or a
//     folder;
//   - does not lie inside the input folder (it could be an input), unless it also lies
//     inside an output folder nested there, which the walk skips, and is not the input
//     file of -i FILE (the paths of -i - are read later and not checked);
//   - is not the other one: the trace cannot be the report, nor its journal.
//
// Every refusal is a usage error, found before anything is written.
func checkWriteTargets(j *job.Job, inInfo os.FileInfo) error {
	report, trace := reportPath(j), j.Exec.Trace
	targets := []struct{ flag, field, path string }{{"--report", "output.report", report}, {"--trace", "execution.trace", trace}}
	for _, t := range targets {
		if t.path == "" || t.path == stdoutPath {
			continue
		}
		if err := checkWriteTarget(t.path, j, inInfo); err != nil {
			return usageError("%s%s %s: %v", posOf(j, t.field), t.flag, t.path, err)
		}
	}
	if trace == "" {
		return nil
	}
	if trace == stdoutPath && report == stdoutPath {
		return usageError("%s--trace - and --report - would both write to standard output; send one of them to a file", posOf(j, "execution.trace"))
	}
	for _, other := range []string{report, journalPath(report)} {
		if other != stdoutPath && trace != stdoutPath && samePath(trace, other) {
			return usageError("%s--trace %s is the report %s; name another file", posOf(j, "execution.trace"), trace, other)
		}
	}
	return nil
}

// checkWriteTarget checks one report or trace path (see checkWriteTargets).
func checkWriteTarget(p string, j *job.Job, inInfo os.FileInfo) error {
	fi, err := os.Lstat(p)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return err
	case !fi.Mode().IsRegular():
		return fmt.Errorf("exists and is %s, not a regular file; name a new file", pipeline.FileKind(fi.Mode()))
	case inInfo == nil && j.InputDir != stdinInput:
		if in, err := os.Stat(j.InputDir); err == nil && os.SameFile(fi, in) {
			return errors.New("is the input file; write it elsewhere")
		}
	}
	dir := filepath.Dir(p)
	if inInfo != nil && within(dir, j.InputDir, inInfo) {
		outInfo, err := os.Stat(j.OutputDir)
		if err != nil {
			outInfo = nil // not made yet: compared by path
		}
		if j.OutputDir == "" || !within(dir, j.OutputDir, outInfo) {
			return fmt.Errorf("lies inside the input folder %s, where it could replace an input; write it elsewhere", j.InputDir)
		}
	}
	return nil
}

// samePath reports whether a and b name the same file: the same file when both exist, or
// the same cleaned absolute path.
func samePath(a, b string) bool {
	fa, errA := os.Stat(a)
	fb, errB := os.Stat(b)
	if errA == nil && errB == nil {
		return os.SameFile(fa, fb)
	}
	aa, errA := filepath.Abs(a)
	ab, errB := filepath.Abs(b)
	return errA == nil && errB == nil && aa == ab
}

// posOf is "file:line:col: " of a job field, or "" for a run without a job file.
func posOf(j *job.Job, field string) string {
	if j.File == "" {
		return ""
	}
	return j.PosOf(field).String() + ": "
}
