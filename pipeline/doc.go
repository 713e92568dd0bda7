// Package pipeline is imgpipe's engine: the stage registry, the spec parser, the YAML job
// loader, the planner, the runner and the Go API.
//
// # Stages and the registry
//
// Every stage is defined once, as a StageDef in a Registry (Builtin holds decode,
// grayscale, blur, boxblur, transpose, histogram and save). A definition carries the
// stage's name, help, typed parameters with defaults and ranges, its kind (source, pixel or
// sink), the output shape of a pixel stage, and its implementation. The spec parser, the
// YAML loader, the planner, `imgpipe stages` and dispatch read the registry; nothing else
// names stages.
//
// # From text to a plan
//
// ParseSpec reads "decode | grayscale | blur sigma=1.5 | save format=png" into Steps, and
// ParseJob/LoadJob read a YAML job (see Job). Both report every problem at once, each with
// its column or file:line:col, and suggest the nearest stage or parameter name. Compile
// checks a chain (decode first, save last if present, at most one histogram) and binds each
// stage's parameters once, giving a Plan: a decode step, the pixel stages, and an optional
// save step.
//
// # Running
//
// Run streams the inputs of a Source (Folder, Inputs, FromChan; Resume wraps a Folder
// source to skip work an earlier report records) through a Plan into a Sink (ToFolder,
// Collect, ToChan). Workers each process one input at a time through the whole chain; the
// number of inputs in flight is bounded by a window, so memory does not depend on the
// number of inputs, and a reorder buffer within that window hands results to the sink, the
// JSON Lines report and the progress callback in input order. A failed input is a Result
// with Status failed and an error "stage: reason"; the run goes on, or stops at the first
// failure with Options.StopOnError. Cancelling the context stops taking inputs, finishes the
// ones in progress (saves are atomic), and still writes the report's summary line.
//
// # Go API
//
// New starts a typed builder (New().Decode().Grayscale().Blur(1.5).Save("png")), Parse
// builds one from a spec, and Pipeline.Run runs it. Pipeline.Flow exposes a pipeline as a
// github.com/reugn/go-streams Flow whose items carry their errors.
//
// # Output names
//
// An output's path is the input's relative path with the extension replaced by the save
// format's (.png or .jpg). When several image files in one folder share a stem (a.jpg,
// a.png, a.JPG, compared without case), each of them is saved as stem.origext.fmt (a.jpg.png,
// a.png.png, a.JPG.png), so nothing is overwritten and names do not depend on timing. A
// name that would still collide fails the later input with an error.
package pipeline
