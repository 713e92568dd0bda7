package job

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/imgpipe/imgpipe/pipeline"
)

func FuzzLoadJob(f *testing.F) {
	for _, name := range []string{"job.yaml", "thumbs.yaml"} {
		if b, err := os.ReadFile(filepath.Join("..", "..", "samples", name)); err == nil {
			f.Add(b)
		}
	}
	for _, s := range []string{
		"input: {dir: a}\npipeline: [decode, save]\noutput: {dir: b}\n",
		"pipeline: decode | blur sigma=2\n",
		"pipeline:\n  - decode\n  - blur:\n    sigma: 1\n",
		"execution: {device: cuda, streams: 64, batch: 4096, workers: 0, on_error: fail, resume: true, trace: t}\n",
		"a: &x [1]\nb: *x\n", "---\n---\n", "input: !!binary aGVsbG8=\n", "{", "- - -", "\t", "pipeline: [&a decode, *a]\n",
		"input: {dir: a, dir: b}\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		job, err := Parse("job.yaml", data)
		if err != nil {
			for _, e := range pipeline.Errors(err) {
				var pe *pipeline.PosError
				if !errors.As(e, &pe) || pe.Pos.File != "job.yaml" || pe.Pos.Line < 0 || pe.Pos.Col < 0 {
					t.Fatalf("error without a file position: %v", e)
				}
			}
			return
		}
		if len(job.Steps) > 0 {
			if _, err := pipeline.Compile(job.Steps); err != nil {
				t.Fatalf("accepted a chain the planner refuses: %v", err)
			}
		}
		// Writing the job back out and reading it again gives the same job.
		again, err := Parse("again.yaml", []byte(jobYAML(job)))
		if err != nil {
			t.Fatalf("re-read of\n%s\nfailed: %v", jobYAML(job), err)
		}
		if pipeline.FormatSpec(again.Steps) != pipeline.FormatSpec(job.Steps) || again.Exec != job.Exec ||
			again.InputDir != job.InputDir || again.OutputDir != job.OutputDir || again.Report != job.Report {
			t.Fatalf("round trip changed the job:\n%+v\n%+v", job, again)
		}
	})
}

// jobYAML writes a job back as YAML, quoting every string.
func jobYAML(j *Job) string {
	var b strings.Builder
	q := func(s string) string { return fmt.Sprintf("%q", s) }
	if j.InputDir != "" {
		fmt.Fprintf(&b, "input: {dir: %s}\n", q(j.InputDir))
	}
	if len(j.Steps) > 0 {
		fmt.Fprintf(&b, "pipeline: %s\n", q(pipeline.FormatSpec(j.Steps)))
	}
	if j.OutputDir != "" || j.Report != "" {
		b.WriteString("output:\n")
		if j.OutputDir != "" {
			fmt.Fprintf(&b, "  dir: %s\n", q(j.OutputDir))
		}
		if j.Report != "" {
			fmt.Fprintf(&b, "  report: %s\n", q(j.Report))
		}
	}
	e := j.Exec
	fmt.Fprintf(&b, "execution: {device: %s, streams: %d, batch: %d, workers: %d, on_error: %s, resume: %v, trace: %s}\n",
		e.Device, e.Streams, e.Batch, e.Workers, e.OnError, e.Resume, q(e.Trace))
	return b.String()
}
