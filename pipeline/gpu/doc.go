// Package gpu is the GPU backend of package pipeline: it runs a plan's pixel (or array)
// stages as one device segment on one or more accelerators (sched.Device: a CUDA GPU, or
// schedtest's fake), with the same outputs, bit for bit, as a CPU run.
//
// Set pipeline.Options.Backend to an *Options for one run, or to the Backend of a Set, which
// holds devices and the memory of their slots for many runs one after another. Check says
// before a run whether its settings can work; RunOptions turns an execution's settings
// into a run's options.
//
// # How a run goes
//
// Decode workers decode each input straight into a page-locked slot of a sched.Executor
// (one per device), which runs batches of images on several streams, overlapping one
// batch's upload, another's kernels and a third's download; save workers store the results
// and release the slots (backend.go). An image too large for a slot runs on the CPU path
// in its decode worker. A device error ends the run; cancelling abandons the batches on
// the device.
//
// The run does not wait for its devices to open: the decode workers run inputs wholly on
// the CPU meanwhile (start.go), and set aside for the devices the inputs they would decode
// whole (aside.go). Under Options.Optional with a count of the inputs, the devices start
// only once the CPU's pace says they are worth it (deferred.go). Over several devices,
// each input goes to an executor with room for it (multi.go).
//
// # What it decides
//
// Where each file decodes (route.go: the decode stage's backend, pipeline.DecodeBackend,
// and the routing rule between the device's decoders and the CPU's), how large slots are
// and what their defaults are (slots.go), and which encoder writes a JPEG output
// (jpeg.go). Array chains go the same way, their elements in the slots (array.go).
package gpu
