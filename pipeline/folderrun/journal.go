package folderrun

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/imgpipe/imgpipe/fsguard"
	"github.com/imgpipe/imgpipe/stages"
)

// JournalPath is where a run writes its report while it goes: ".NAME.journal" beside the
// report. Each line is there as soon as its input is reported (pipeline.Options.Report),
// so a run killed outright (SIGKILL, the OOM killer, a power cut up to the last second)
// leaves a journal that --resume reads; a run that ends renames it to the report.
func JournalPath(report string) string {
	dir, base := filepath.Split(report)
	return filepath.Join(dir, "."+base+".journal")
}

// journal is the report of a run in progress.
type journal struct {
	path, report string
	f            *os.File
	// prev is the journal a killed run left, kept aside (path + ".prev") until this run's
	// own report replaces it; "" when there was none.
	prev string
	// werr is the first error writing the journal: then it lacks lines.
	werr error
}

// openJournal starts the journal of a run whose report goes to report. A journal left by
// a killed run is first moved aside, so that --resume can still read it (previous) and so
// that a run that does nothing puts it back.
func openJournal(report string) (*journal, error) {
	j := &journal{path: JournalPath(report), report: report}
	prev := j.path + ".prev"
	switch err := os.Rename(j.path, prev); {
	case err == nil:
		j.prev = prev
	case !errors.Is(err, fs.ErrNotExist):
		return nil, err
	}
	f, err := os.OpenFile(j.path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		j.restore()
		return nil, err
	}
	j.f = f
	return j, nil
}

// openReports opens the reports at paths that exist, in order; "" is passed over; one that
// is not a regular file (a link, a FIFO) is an error. The caller closes them. A run's previous reports, newest first, are the journal of a killed
// run (journal.prev once openJournal moved it aside) and the last finished report.
func openReports(paths ...string) ([]*os.File, error) {
	var files []*os.File
	for _, p := range paths {
		if p == "" {
			continue
		}
		// The run's own files: a link or a FIFO left there is refused, not followed or
		// waited on.
		f, _, err := fsguard.Open(p, fsguard.NoLinks)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			closeAll(files)
			return nil, err
		}
		files = append(files, f)
	}
	return files, nil
}

func closeAll(files []*os.File) {
	for _, f := range files {
		f.Close()
	}
}

// commit makes the journal the report: it is synced (pipeline synced it at the summary),
// closed and renamed over the report, and the journal moved aside is dropped. A journal
// that could not be written whole is left as it is, beside the previous report.
func (j *journal) commit() error {
	if j.werr != nil {
		// Lines are missing: the previous report stays, and --resume reads this journal
		// before it.
		j.f.Close()
		return fmt.Errorf("the journal could not be written (%v), so the previous report is kept", j.werr)
	}
	if err := j.f.Close(); err != nil {
		os.Remove(j.path)
		j.restore()
		return err
	}
	if err := os.Rename(j.path, j.report); err != nil {
		return err // the journal stays: --resume reads it
	}
	if j.prev != "" {
		os.Remove(j.prev)
	}
	return stages.SyncDir(filepath.Dir(j.report))
}

// discard drops the journal of a run that did no input, leaving the previous report and
// any journal of a killed run as they were (--resume may still need them).
func (j *journal) discard() {
	j.f.Close()
	os.Remove(j.path)
	j.restore()
}

// restore puts a journal moved aside back in place.
func (j *journal) restore() {
	if j.prev != "" {
		os.Rename(j.prev, j.path)
		j.prev = ""
	}
}

// writer is where pipeline.Run writes the report: the journal file, which pipeline syncs
// as it goes; a write or sync that fails (a full disk) is kept in werr, so that commit
// never puts a journal with lines missing in place of the previous report.
func (j *journal) writer() io.Writer { return (*journalWriter)(j) }

type journalWriter journal

func (w *journalWriter) Write(p []byte) (int, error) {
	n, err := w.f.Write(p)
	if err != nil && w.werr == nil {
		w.werr = err
	}
	return n, err
}

func (w *journalWriter) Sync() error {
	err := w.f.Sync()
	if err != nil && w.werr == nil {
		w.werr = err
	}
	return err
}
