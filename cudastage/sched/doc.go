// Package sched is the overlapped multi-stream batch scheduler behind
// `imgpipe run --device cuda` and `imgpipe bench raw`: it runs one device
// segment (a chain of pixel ops: grayscale, blur, boxblur, transpose,
// histogram) over a stream of images so that the H2D copy of batch k, the
// kernels of batch k−1 and the D2H copy of batch k−2 overlap.
//
// It is written against a small Device interface (streams, events,
// page-locked and device memory, async copies, one batched launch per op),
// so that the scheduling is tested on the CPU under -race with
// schedtest.FakeDevice, which runs each op's CPU function and delays its
// copies. The CUDA adapter lives in package cudastage.
//
// # Slots and memory
//
// An Executor owns Slots slots. A slot holds one batch: a page-locked input
// region of SlotBytes, two device buffers of SlotBytes between which the ops
// ping-pong (the input buffer is reused once the first op has read it), a
// page-locked output region, per-image histogram memory, launch tables and
// events. Nothing is allocated per batch, and memory is bounded by
// Slots × slot size (Stats.HostBytes, Stats.DeviceBytes). Images are packed
// with a table of offsets, each at a 256-byte boundary, and each op's output
// is packed separately, so the one D2H per batch copies no holes.
//
// The host buffers come from a page-locked pool (memory/pinned, drawing on
// Device.HostAlloc) and the device buffers from a caching allocator
// (memory/devmem, drawing on Device.DevAlloc). An executor makes its own
// pools, with MaxHostBytes and MaxDeviceBytes as budgets, or takes shared
// ones (Config.HostPool, Config.DevicePool) so that executors run one after
// another on a device reuse the memory instead of allocating it again;
// Stats gives the pools' figures.
//
// # Lifecycle
//
// Decode workers call Reserve for each image (from stages.Decode's Alloc
// hook); it blocks while no slot is free, which is the back-pressure that
// bounds memory. They write pixels straight into the slot's page-locked
// memory and Commit (or Abort on a decode error: the image is dropped, the
// batch goes on). A slot is sealed when full, when the next image does not
// fit, after Linger (when positive), or on Flush/CloseInput, and is submitted
// when its last reservation resolved. Its results arrive on Results once its
// D2H completed; the slot is reused when every result was released. An image
// larger than a slot gives ErrTooLarge: run it on the CPU path. A caller that
// spreads images over the executors of several devices sets Config.Room: then
// Reserve never blocks but returns ErrNoRoom, and Room says when a slot frees.
//
// # Files in, files out
//
// ReserveFile takes room for an encoded file that the device decodes itself
// (a Device that implements FileDecoder): the file's bytes go into the slot's
// page-locked input, packed from its end, and the decoded image into its
// device input after the raw images, so that one H2D still copies every raw
// image and only the file's bytes cross the link. After the H2D the batch's
// files are decoded on its stream (the "decode" phase of Stats and the
// trace); an image that does not decode gets a Result with Err, and its
// batch-mates go on. A segment whose last op encodes (Op.Encode) writes at
// most Bound bytes per image and each length; the executor copies the
// lengths back, then only each file's bytes, on a stream of their own, and
// delivers Result.Encoded.
//
// # Streams and timing
//
// Batches go to the streams round robin. Each batch waits (on the device,
// through events) for the previous batch's H2D before its H2D, for its
// kernels before its kernels, and for its D2H before its D2H, so each copy
// engine and the SMs work on one batch at a time in submission order. This
// costs no overlap (the copy engines serialize anyway) and makes the events
// around each phase time the engine's work, not its queueing: Stats gives
// exact ΣH2D, Σkernels and ΣD2H, and the overlap efficiency wall ÷ max of
// the three. Decode is not chained: the decodes of batches on different
// streams overlap (a GPU has several hardware JPEG engines), so Σdecode sums
// spans that may run at the same time. Two streams
// already overlap one batch's copies with another's kernels, and three
// suffice for a full three-stage pipeline. The executor has no defaults: the
// caller sets Streams, Slots, Batch, SlotBytes and Linger. Packages pipeline
// and pipeline/gpu hold a run's defaults (two streams, batches of 16), and
// gpu.DefaultSlots gives Streams+2 slots: one batch per stream on the
// device, one filling, one held by the consumers.
//
// # Threads and errors
//
// A CUDA context is current per OS thread. The executor submits each
// stream's batches from a goroutine of its own and makes all event waits
// from another, each locked to its OS thread and bound with
// Device.BindThread, so waiting never blocks submission and a decode call
// that blocks its thread (nvJPEG's batched hardware decode) holds up only
// its stream. The submitting goroutines keep the device-side order above on
// the host (order.go): a batch waits on the previous batch's event only once
// that batch recorded it, and batches reach the waiter, and their Results
// the caller, in batch order. Any device error is fatal: the executor stops, waits for the
// device to finish with the memory of the batches in flight, abandons them,
// closes Results, and Wait returns the error (the CLI maps it to exit code
// 3). Cancelling the context does the same with the context's error. No
// goroutine outlives Wait, and no slot is lost.
package sched
