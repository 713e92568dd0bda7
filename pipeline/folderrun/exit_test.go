package folderrun

import (
	"context"
	"os"
	"testing"

	"github.com/imgpipe/imgpipe/pipeline"
)

func TestExitCode(t *testing.T) {
	for _, tc := range []struct {
		sum  pipeline.Summary
		err  error
		code int
	}{
		{pipeline.Summary{OK: 2}, nil, ExitOK},
		{pipeline.Summary{OK: 1, Failed: 1}, nil, ExitSomeFailed},
		{pipeline.Summary{Failed: 1, Stopped: true}, pipeline.ErrStopped, ExitSomeFailed},
		{pipeline.Summary{OK: 1, Interrupted: true}, context.Canceled, ExitInterrupted},
		{pipeline.Summary{}, &RequestError{Err: os.ErrNotExist}, ExitUsage},
		{pipeline.Summary{OK: 1}, &RunError{Err: os.ErrPermission}, ExitFatal},
		{pipeline.Summary{}, os.ErrClosed, ExitFatal},
		{pipeline.Summary{}, nil, ExitNoInputs},
		{pipeline.Summary{Skipped: 3}, nil, ExitOK},
	} {
		if got := ExitCode(tc.sum, tc.err); got != tc.code {
			t.Errorf("%+v %v: exit %d, want %d", tc.sum, tc.err, got, tc.code)
		}
	}
}
