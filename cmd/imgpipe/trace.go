package main

import (
	"fmt"
	"os"
	"time"

	"github.com/imgpipe/imgpipe/pipeline"
)

// traceFile is the --trace output: a Chrome trace-event timeline of the run, with a track
// per worker and a span per stage per image.
type traceFile struct {
	f *os.File
	w *pipeline.TraceWriter
}

func openTrace(path string, start time.Time) (*traceFile, error) {
	if path == "" {
		return nil, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, fatalError("--trace: %v", err)
	}
	return &traceFile{f: f, w: pipeline.NewTraceWriter(f, start)}, nil
}

func (t *traceFile) close() error {
	err := t.w.Close()
	if cerr := t.f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("--trace: %w", err)
	}
	return nil
}
