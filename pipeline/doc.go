// Package pipeline is imgpipe's engine: the stage registry, the spec parser, the planner,
// the runner and the Go API. YAML job files are read by the subpackage pipeline/job, the
// only one that imports a YAML library.
//
// # Stages and the registry
//
// Every stage is defined once, as a StageDef in a Registry. Builtin holds the builtin
// stages, each defined in a file of its own (stage_<name>.go) that registers it from init;
// the kernel stage, which needs NVRTC and the driver, registers itself from package
// pipeline/kernelstage, which a program imports for that effect. A definition carries the
// stage's name, help, typed parameters with defaults and ranges, its kind (source, pixel,
// array or sink), the output shape of a pixel stage, its CPU implementation and, optionally,
// the binder of its GPU launch arguments (sched.LaunchArgs). The spec parser, the YAML
// loader, the planner, `imgpipe stages` and dispatch read the registry; nothing else names
// stages.
//
// # From text to a plan
//
// ParseSpec reads "decode | grayscale | blur sigma=1.5 | save format=png" into Steps, and
// pipeline/job reads a YAML job into the same Steps. Both report every problem at once, each
// with its column or file:line:col, and suggest the nearest stage or parameter name. Compile
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
// number of inputs, and a reorder buffer (at most ReorderSpan windows of small results)
// hands results to the sink, the JSON Lines report and the progress callback in input
// order. A failed input is a Result with Status failed and an error "stage: reason"; the
// run goes on, or stops at the first failure with Options.StopOnError. Cancelling the
// context stops taking inputs, finishes the ones in progress (saves are atomic), and still
// writes the report's summary line. A run into a folder with the CLI's guarantees (one run
// per output folder, the report as a journal, resume, temporary files cleaned after a
// crash) is package pipeline/folderrun's.
//
// # On a GPU
//
// Each builtin pixel and array stage also has a GPU implementation (StageDef.GPU, a
// cudastage/sched op). Plan.DeviceOps gives the ops of a plan whose pixel stages form one
// device segment, which is every plan the builtin registry can produce. The GPU backend
// is package pipeline/gpu: with Options.Backend set to one (gpu.Options, or a gpu.Set's
// Backend), Run keeps the same feeder, window, reorder buffer, report and sinks, and the
// backend's decode workers decode each input straight into a page-locked slot of a
// sched.Executor, and its save workers encode the results. Results are the CPU's bits. A
// plan whose pixel stages cannot all run there runs wholly on the CPU (Options.Notice says
// so). A backend sees a run only through the small seam that Run gives it: Backend and
// BoundBackend, which it implements, and the Runner, Item and Worker through which it
// takes the run's inputs, reads, decodes, stores and fails them as a CPU run does, and
// hands them back in any order to be reported in input order.
//
// # Go API
//
// New starts a typed builder (New().Decode().Grayscale().Blur(1.5).Save("png")), Parse
// builds one from a spec, and Pipeline.Run runs it. The subpackage pipeline/flow exposes a
// pipeline as a github.com/reugn/go-streams Flow whose items carry their errors, so that this
// package does not import go-streams.
//
// # Output names
//
// An output's path is the input's relative path with the extension replaced by the save
// format's (.png or .jpg). When several image files in one folder share a stem (a.jpg,
// a.png, a.JPG, compared without case), each of them is saved as stem.origext.fmt (a.jpg.png,
// a.png.png, a.JPG.png), so nothing is overwritten and names do not depend on timing. A
// name that would still collide fails the later input with an error.
package pipeline
