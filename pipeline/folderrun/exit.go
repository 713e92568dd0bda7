package folderrun

import (
	"errors"

	"github.com/imgpipe/imgpipe/pipeline"
)

// Exit codes of a run, as README.md#report-and-exit-codes fixes them: the CLI ends with
// them, and a server reports them for the jobs it runs.
const (
	ExitOK          = 0   // every input ok
	ExitSomeFailed  = 1   // some inputs failed, the rest were done
	ExitUsage       = 2   // usage, spec or job error: nothing was processed
	ExitFatal       = 3   // fatal runtime error (device fault, unwritable output, ...)
	ExitNoInputs    = 4   // no input selected: nothing was done
	ExitInterrupted = 130 // interrupted; in-flight outputs finished or removed
)

// ExitCode is the exit code of a run that ended with sum and err (Run's results).
func ExitCode(sum pipeline.Summary, err error) int {
	switch {
	case errors.As(err, new(*RequestError)):
		return ExitUsage
	case errors.As(err, new(*RunError)):
		return ExitFatal
	case sum.Interrupted:
		return ExitInterrupted
	case sum.Failed > 0:
		return ExitSomeFailed
	case err != nil:
		return ExitFatal
	case sum.Total() == 0:
		return ExitNoInputs
	}
	return ExitOK
}
