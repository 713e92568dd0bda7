package pipeline

import (
	"context"
	"io"
	"os"
	"path/filepath"
)

// Resume wraps a Folder source for a run that continues an earlier one. An input is passed
// on marked done (Input.Previous set; reported as "skipped", keeping its width, height and
// histogram from the earlier report) when the previous report lists it as ok or skipped,
// with the output name this run would give it, and that output file still exists under
// outDir. ext is the save format's extension; "" when the chain saves nothing, in which case
// the previous status alone decides. Everything else is done again. The chain itself is not
// compared: resuming with different stage parameters keeps the old outputs.
//
// The previous report is read in step with the walk (both are in walk order), so memory
// does not grow with the number of inputs. Lines out of walk order are ignored, and their
// inputs redone.
func Resume(src Source, previous io.Reader, outDir, ext string) Source {
	return &resumeSource{src: src, prev: newReportReader(previous), outDir: outDir, ext: ext}
}

type resumeSource struct {
	src    Source
	prev   *reportReader
	cur    *ReportLine
	eof    bool
	outDir string
	ext    string
}

func (s *resumeSource) Next(ctx context.Context) (Input, error) {
	in, err := s.src.Next(ctx)
	if err != nil || in.Err != nil || in.Previous != nil {
		return in, err
	}
	if l := s.lookup(in.Name); l != nil && s.done(in, l) {
		in.Previous = l
	}
	return in, nil
}

// lookup advances the previous report to name and returns its line there, if any.
func (s *resumeSource) lookup(name string) *ReportLine {
	for !s.eof {
		if s.cur == nil {
			l, err := s.prev.next()
			if err != nil {
				s.eof = true // an unreadable rest of the report only means more work
				return nil
			}
			s.cur = l
		}
		switch {
		case s.cur.Input == name:
			l := s.cur
			s.cur = nil
			return l
		case walkLess(s.cur.Input, name):
			s.cur = nil // an input that is gone, or a line out of order
		default:
			return nil
		}
	}
	return nil
}

func (s *resumeSource) done(in Input, l *ReportLine) bool {
	if l.Status != StatusOK && l.Status != StatusSkipped {
		return false
	}
	if s.ext == "" {
		return l.Output == ""
	}
	want := outputName(in, s.ext)
	if l.Output != want {
		return false
	}
	fi, err := os.Stat(filepath.Join(s.outDir, filepath.FromSlash(want)))
	return err == nil && fi.Mode().IsRegular()
}

// outputName is an input's output path relative to the output folder, for a format's ext.
func outputName(in Input, ext string) string {
	st := in.OutStem
	if st == "" {
		st = stem(in.Name)
	}
	return st + "." + ext
}
