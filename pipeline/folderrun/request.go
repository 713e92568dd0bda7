// Package folderrun runs a chain from a folder or bucket into a folder or bucket with the
// guarantees `imgpipe run` gives: one run per output folder (a lock), a report that is a
// journal (a killed run leaves it readable, and --resume carries on from it), the temporary
// files of a killed run removed, no write that can clobber an input or another file, and
// the device chosen and opened as the execution settings say. The CLI's run, worker and
// bench files go through it, and so can a Go program (see Example).
//
// Messages name the settings as the CLI's flags do (--resume, --report), since they are
// the ones users read.
package folderrun

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/imgpipe/imgpipe/blobio"
	"github.com/imgpipe/imgpipe/cudastage/sched"
	"github.com/imgpipe/imgpipe/pipeline"
)

// ReportName is the report's name in the output folder or bucket when none is named.
const ReportName = "imgpipe-report.jsonl"

// StdinInput is the Request.Input that reads a list of paths, one a line, from Stdin.
const StdinInput = "-"

// StdoutPath is the Request.Report (and execution trace) that means Request.Stdout.
const StdoutPath = "-"

// NoReport is the Request.Report that keeps no report (./none names a file of that name).
const NoReport = "none"

// Request says what to run, where from and where to, and what to tell the caller.
type Request struct {
	// Plan is the compiled chain.
	Plan *pipeline.Plan
	// Input is the input folder (walked recursively) or bucket URL, one image file, or
	// StdinInput.
	Input string
	// Output is the output folder (made if missing) or bucket URL; "" for a chain that
	// saves nothing.
	Output string
	// Report is the report's path: "" for ReportName in Output, StdoutPath for Stdout,
	// NoReport for none.
	Report string
	// Name, when set, is the outputs' name template (pipeline.CheckNameTemplate). An Output
	// with the save format's extension, for a single-file Input, names the one output file
	// instead: Output is then its folder, and the report goes there.
	Name  string
	named bool // Output was a file's name, now its folder (namedOutput)
	// Selection picks the inputs; without extensions, every format the chain's source reads.
	Selection pipeline.Selection
	// Exec are the execution settings: the run's options, and the device, GPUs, shard,
	// resume and trace, which this package acts on.
	Exec pipeline.Execution
	// Pos, when set, says where a setting ("input.dir", "execution.trace") was written, for
	// the messages of a job file's mistakes.
	Pos func(field string) pipeline.Pos
	// Stdin holds the list of paths of StdinInput.
	Stdin io.Reader
	// NullList says the paths on Stdin are each ended by a NUL byte (find -print0), not a
	// newline; it needs StdinInput.
	NullList bool
	// Stdout receives a report or trace sent to StdoutPath.
	Stdout io.Writer
	// GPUs says how the run opens its GPUs; the zero value uses the CUDA driver.
	GPUs GPUs
	// Devices, when set, are GPUs the caller opened (and closes): the run uses them instead
	// of opening Exec's.
	Devices []sched.Device
	// Starting, when set, is called once just before the first input is taken, with the
	// inputs (resume applied); the run takes its inputs from the source it returns.
	Starting func(pipeline.Source) pipeline.Source
	// Options, when set, has the last word on the run's options (bench shares its pools).
	Options func(*pipeline.Options)
	// Progress, when set, is called for every result, in input order.
	Progress func(*pipeline.Result)
	// Notice, when set, receives what the user must hear: a device fallback, a cleanup
	// that failed, the run's own notices.
	Notice func(msg string)
	// Info, when set, receives what is only informative (temporary files removed, no
	// previous report to resume from).
	Info func(msg string)
	// Work, when set, runs the chain instead of a walk of Input: the queue worker's, which
	// takes its inputs from the queue. Workers share their output folder and the queue
	// keeps their results, so such a run checks no paths, takes no lock, keeps no report
	// and removes no temporary files.
	Work func(context.Context, Work) (pipeline.Summary, error)
}

// Work is what Request.Work runs the chain with.
type Work struct {
	// Plan is Request.Plan.
	Plan *pipeline.Plan
	// Store is Input, opened.
	Store blobio.Store
	// Sink is Output, opened; one that keeps nothing for a chain that saves nothing.
	Sink pipeline.Sink
	// Options are Exec's, on the opened devices.
	Options pipeline.Options
}

// RequestError is a bad request (usage, chain or path mistake): nothing was processed.
type RequestError struct{ Err error }

// Error is the mistake's message.
func (e *RequestError) Error() string { return e.Err.Error() }

// Unwrap is the mistake.
func (e *RequestError) Unwrap() error { return e.Err }

// RunError is a failure at run time (no usable GPU, an unwritable output or report, a
// device fault).
type RunError struct{ Err error }

// Error is the failure's message.
func (e *RunError) Error() string { return e.Err.Error() }

// Unwrap is the failure.
func (e *RunError) Unwrap() error { return e.Err }

func badf(format string, args ...any) error {
	return &RequestError{Err: fmt.Errorf(format, args...)}
}

func failf(format string, args ...any) error {
	return &RunError{Err: fmt.Errorf(format, args...)}
}

// ReportPath is where the run's report goes: Report, or ReportName in Output (for a
// bucket, the object's URL, for messages).
func (r *Request) ReportPath() string {
	if r.Report != "" {
		return r.Report
	}
	if blobio.IsURL(r.Output) {
		return strings.TrimSuffix(r.Output, "/") + "/" + ReportName
	}
	return filepath.Join(r.Output, ReportName)
}

// bucketReport tells whether the run's report goes into its output bucket, as the object
// ReportName: the output is a bucket and no report path is named. An object store has no
// journal, no lock and no temporary files (an object is whole or absent), so the report is
// written as one object at the end.
func (r *Request) bucketReport() bool {
	return r.Report == "" && blobio.IsURL(r.Output)
}

// at is "file:line:col: " of a setting, or "" without positions.
func (r *Request) at(field string) string {
	if r.Pos == nil {
		return ""
	}
	return r.Pos(field).String() + ": "
}

func (r *Request) notice(format string, args ...any) {
	if r.Notice != nil {
		r.Notice(fmt.Sprintf(format, args...))
	}
}

func (r *Request) info(format string, args ...any) {
	if r.Info != nil {
		r.Info(fmt.Sprintf(format, args...))
	}
}
