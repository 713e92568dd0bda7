package folderrun

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A killed run's journal is moved aside while the next run goes: a run that does nothing
// puts it back, one that finishes replaces the report and drops it.
func TestJournalKeepsAKilledRunsJournal(t *testing.T) {
	for _, commit := range []bool{false, true} {
		dir := t.TempDir()
		report := filepath.Join(dir, ReportName)
		if err := os.WriteFile(report, []byte("old report\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(JournalPath(report), []byte("killed run\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		j, err := openJournal(report)
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := os.ReadFile(j.prev); string(got) != "killed run\n" {
			t.Fatalf("the killed run's journal aside holds %q", got)
		}
		if _, err := j.writer().Write([]byte("new run\n")); err != nil {
			t.Fatal(err)
		}
		wantReport, wantJournal := "old report\n", "killed run\n"
		if commit {
			if err := j.commit(); err != nil {
				t.Fatal(err)
			}
			wantReport, wantJournal = "new run\n", ""
		} else {
			j.discard()
		}
		if got, _ := os.ReadFile(report); string(got) != wantReport {
			t.Errorf("commit %v: report %q, want %q", commit, got, wantReport)
		}
		if got, _ := os.ReadFile(JournalPath(report)); string(got) != wantJournal {
			t.Errorf("commit %v: journal %q, want %q", commit, got, wantJournal)
		}
		if _, err := os.Stat(JournalPath(report) + ".prev"); err == nil {
			t.Errorf("commit %v: the journal moved aside is still there", commit)
		}
	}
}

// within sees a folder inside another through links and other spellings of its path.
func TestWithin(t *testing.T) {
	root := t.TempDir()
	in := filepath.Join(root, "in")
	if err := os.MkdirAll(filepath.Join(in, "out"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(in, "out"), filepath.Join(root, "link")); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(in)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		dir  string
		info bool
		want bool
	}{
		{filepath.Join(in, "out"), true, true},
		{filepath.Join(root, "link"), true, true},         // a link into the input folder
		{filepath.Join(in, "..", "in", "x"), false, true}, // not there yet: by path
		{root, true, false},
		{filepath.Join(root, "other"), false, false},
	}
	for _, tt := range tests {
		var info os.FileInfo
		if tt.info {
			info = fi
		}
		if got := within(tt.dir, in, info); got != tt.want {
			t.Errorf("within(%s, %s) = %v, want %v", tt.dir, in, got, tt.want)
		}
	}
}

// A journal that could not be written whole (a full disk) never replaces the previous
// report: commit leaves both, and says so.
func TestJournalWriteFailureKeepsReport(t *testing.T) {
	dir := t.TempDir()
	report := filepath.Join(dir, ReportName)
	if err := os.WriteFile(report, []byte("previous\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	j, err := openJournal(report)
	if err != nil {
		t.Fatal(err)
	}
	j.f.Close()
	if j.f, err = os.Open(j.path); err != nil { // read-only: every write fails, as on a full disk
		t.Fatal(err)
	}
	if _, err := j.writer().Write([]byte("line\n")); err == nil {
		t.Fatal("a write to a read-only journal succeeded")
	}
	if err := j.commit(); err == nil || !strings.Contains(err.Error(), "previous report is kept") {
		t.Errorf("commit: %v", err)
	}
	if got, _ := os.ReadFile(report); string(got) != "previous\n" {
		t.Errorf("the report is now %q", got)
	}
	if _, err := os.Stat(j.path); err != nil {
		t.Errorf("the journal: %v", err)
	}
}
