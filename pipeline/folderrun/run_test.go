package folderrun

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/imgpipe/imgpipe/cudastage/sched"
	"github.com/imgpipe/imgpipe/pipeline"
)

// Run's two kinds of error: a mistake is a *RequestError found before anything is written,
// a failure a *RunError; a GPU that cannot be opened fails before the output folder is made.
func TestRunErrorKinds(t *testing.T) {
	plan, err := pipeline.CompileSpec("decode | grayscale | save")
	if err != nil {
		t.Fatal(err)
	}
	in := t.TempDir()
	noGPU := GPUs{Open: func(int) (sched.Device, func() error, error) { return nil, nil, errors.New("no driver") }}
	tests := []struct {
		name    string
		out     string
		device  string
		wantBad bool
	}{
		{"output is the input", in, "cpu", true},
		{"input inside the output", filepath.Dir(in), "cpu", true},
		{"cuda without a GPU", filepath.Join(t.TempDir(), "out"), "cuda", false},
	}
	for _, tt := range tests {
		exec := pipeline.DefaultExecution()
		exec.Device = tt.device
		_, err := Run(context.Background(), Request{Plan: plan, Input: in, Output: tt.out, Exec: exec, GPUs: noGPU})
		var bad *RequestError
		var fail *RunError
		switch {
		case tt.wantBad && !errors.As(err, &bad), !tt.wantBad && !errors.As(err, &fail):
			t.Errorf("%s: %T %v, want a bad request %v", tt.name, err, err, tt.wantBad)
		}
		if _, err := os.Stat(filepath.Join(tt.out, ReportName)); err == nil {
			t.Errorf("%s: a report was written", tt.name)
		}
		if !tt.wantBad {
			if _, err := os.Stat(tt.out); err == nil {
				t.Errorf("%s: the output folder was made", tt.name)
			}
		}
	}
}
