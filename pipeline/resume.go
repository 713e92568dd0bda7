package pipeline

import (
	"context"
	"io"
	"os"
	"path/filepath"
)

// Resume wraps a Folder source for a run that continues earlier ones under plan. An input
// is passed on marked done (Input.Previous set; reported as "skipped", keeping its width,
// height and histogram from the earlier report) only when all of these hold for its line
// in the previous reports:
//   - its status was ok or skipped;
//   - it was done by the same chain: the line's pipeline is plan's canonical spec, so a
//     changed stage or parameter redoes every input;
//   - its input file did not change since: the size and modification time the line
//     records are those the source gives now (an input without them, from a source that
//     does not know them, is checked on the chain alone);
//   - its output has the name this run would give it, and is still a regular file under
//     outDir (a link there does not count). A chain that saves nothing needs no output.
//     ResumeOutputs takes another check, for outputs that are not in a folder (a bucket).
//
// Everything else is done again. previous are the earlier reports, newest first (the
// journal a killed run left, then the last finished report): the first that lists an input
// decides for it. Names are matched exactly, byte for byte, names that are not UTF-8
// included.
//
// Each previous report is read in step with the walk (both are in walk order), so memory
// does not grow with the number of inputs. Lines out of walk order are ignored, and their
// inputs redone.
func Resume(src Source, plan *Plan, outDir string, previous ...io.Reader) Source {
	return ResumeOutputs(src, plan, FolderOutputs(outDir), previous...)
}

// OutputCheck tells whether an earlier run's output, named by its slash path relative to
// the output folder or bucket, is still there. It answers false when it cannot tell (an
// unreadable folder, a bucket that does not answer): that only means more work.
type OutputCheck func(ctx context.Context, name string) bool

// FolderOutputs is the OutputCheck of the output folder dir: the output is a regular file
// there; a link does not count, since a run never makes one.
func FolderOutputs(dir string) OutputCheck {
	return func(_ context.Context, name string) bool {
		fi, err := os.Lstat(filepath.Join(dir, filepath.FromSlash(name)))
		return err == nil && fi.Mode().IsRegular()
	}
}

// ResumeOutputs is Resume with the check has for the earlier run's outputs.
func ResumeOutputs(src Source, plan *Plan, has OutputCheck, previous ...io.Reader) Source {
	s := &resumeSource{src: src, has: has, chain: plan.String()}
	if plan.Save != nil {
		s.ext = plan.Save.Ext
	}
	for _, p := range previous {
		s.prev = append(s.prev, &prevReport{r: newReportReader(p)})
	}
	return s
}

type resumeSource struct {
	src   Source
	prev  []*prevReport
	has   OutputCheck
	ext   string
	chain string
}

// prevReport is one earlier report, read in step with the walk.
type prevReport struct {
	r   *reportReader
	cur *ReportLine
	eof bool
}

func (s *resumeSource) Next(ctx context.Context) (Input, error) {
	in, err := s.src.Next(ctx)
	if err != nil || in.Err != nil || in.Previous != nil {
		return in, err
	}
	for _, p := range s.prev {
		if l := p.lookup(in.Name); l != nil {
			if s.done(ctx, in, l) {
				in.Previous = l
			}
			break
		}
	}
	return in, nil
}

// lookup advances the report to name and returns its line there, if any.
func (p *prevReport) lookup(name string) *ReportLine {
	for !p.eof {
		if p.cur == nil {
			l, err := p.r.next()
			if err != nil {
				p.eof = true // an unreadable rest of the report only means more work
				return nil
			}
			p.cur = l
		}
		switch got := p.cur.name(); {
		case got == name:
			l := p.cur
			p.cur = nil
			return l
		case walkLess(got, name):
			p.cur = nil // an input that is gone, or a line out of order
		default:
			return nil
		}
	}
	return nil
}

func (s *resumeSource) done(ctx context.Context, in Input, l *ReportLine) bool {
	if l.Status != StatusOK && l.Status != StatusSkipped || l.Pipeline != s.chain {
		return false
	}
	if (in.Size != 0 || !in.ModTime.IsZero()) && (l.Size != in.Size || l.ModTime != in.ModTime.UnixNano()) {
		return false
	}
	if s.ext == "" {
		return l.output() == ""
	}
	want := outputName(in, s.ext)
	return l.output() == want && s.has(ctx, want)
}

// outputName is an input's output path relative to the output folder, for a format's ext.
func outputName(in Input, ext string) string {
	st := in.OutStem
	if st == "" {
		st = stem(in.Name)
	}
	return st + "." + ext
}
