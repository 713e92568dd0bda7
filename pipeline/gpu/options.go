package gpu

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/imgpipe/imgpipe/cudastage/sched"
	"github.com/imgpipe/imgpipe/pipeline"
)

// Options runs a plan's pixel stages on an accelerator as one device segment: decode
// workers decode each input straight into a page-locked slot of a sched.Executor, which
// runs batches of images on Streams streams, overlapping one batch's upload, another's
// kernels and a third's download; save workers encode the results from page-locked memory
// and release the slots. Memory is bounded by Slots × the slot size. *Options is a
// pipeline.Backend: set it as pipeline.Options.Backend.
//
// An image too large for a slot runs on the CPU path instead, in its decode worker (same
// bits; Summary.CPUFallback counts them). A decode error fails only its input, never the
// batch. A device error is fatal to the run: batches on the device are abandoned and Run
// returns the error; outputs already written are complete.
type Options struct {
	// Device is the accelerator: a CUDA GPU (cudastage.NewDevice) or schedtest.NewFake. Run
	// neither opens nor closes it.
	Device sched.Device
	// Devices, instead of Device, spreads the run over several accelerators (see
	// multi.go): the settings below are each one's.
	Devices []sched.Device
	// Streams is the number of device streams; 0 means pipeline.DefaultStreams. Its range
	// is the streams execution setting's.
	Streams int
	// Batch is the most images per batch; 0 means pipeline.DefaultBatch, or the device
	// decoder's call size when it decodes the files (see gpuBatch). Its range is the batch
	// execution setting's.
	Batch int
	// Slots is the number of batches in flight, from filling to saved; 0 means
	// DefaultSlots(Streams).
	Slots int
	// SlotBytes is a slot's input capacity in bytes; 0 means what PinnedBytes gives, or
	// DefaultSlotBytes(Batch).
	SlotBytes int
	// PinnedBytes, when positive, is the page-locked host memory the slots share: the slot
	// size is what fits (about as much device memory is used), and larger slots take larger
	// images or more of them per batch. 0 sizes slots for Batch 1080p RGB frames.
	PinnedBytes int64
	// Linger is how long a partly filled batch waits for more images; 0 means
	// DefaultLinger.
	Linger time.Duration
	// Wait makes the run wait for devices still opening (sched.Starter) before it takes
	// its first input; by default the decode workers run inputs wholly on the CPU until
	// the executors are up (see start.go).
	Wait bool
	// Optional lets the run go on on the CPU, with a notice, when a device fails to finish
	// opening in the background (sched.Starter: the CUDA driver finds no device, or cannot
	// create its context); otherwise, and for a device that does not exist
	// (sched.ErrNoSuchDevice), that fails the run. The CLI's --device auto sets it.
	Optional bool
	// Inputs, when positive with Optional, is how many inputs the run has (the caller
	// counted a local folder, say). The run then starts its devices only when the CPU's
	// measured pace says that it would need longer alone than a GPU's start costs (see
	// deferred.go); a smaller run never starts them and reports Summary.GPUNotStarted. 0:
	// unknown, and the devices start with the run.
	Inputs int

	// pools are, per device, the memory its slots share with other runs (Set.Backend);
	// nil: each run allocates and frees its own.
	pools []pools
}

// Bind implements pipeline.Backend: it checks o against plan and sizes the executors. It
// returns nil, after giving a notice, when the plan's pixel stages cannot run as one
// device segment: then the whole chain runs on the CPU. (Every builtin pixel stage has a
// GPU implementation, so with the builtin registry this only happens for a chain without
// pixel stages.) writesOnly allows the save stage's device encoding op (see deviceOps):
// for sinks that only write the output (ToFolder, Discard), since the result then has no
// image.
func (o *Options) Bind(plan *pipeline.Plan, opt pipeline.Options, writesOnly bool) (pipeline.BoundBackend, error) {
	g, err := newGPURun(plan, o, opt.Notice, writesOnly)
	if err != nil || g == nil {
		return nil, err
	}
	return &gpuBackend{run: g, writesOnly: writesOnly}, nil
}

// Check reports whether opt's backend is usable for plan, with the error Run would
// return, without starting anything: the CLI calls it before it creates the output folder
// or touches the report, so that a bad setting (a batch whose slots do not fit in
// PinnedBytes, say) is a usage error that leaves no trace. A run on the CPU (no backend)
// is checked too: decode backend=nvjpeg is refused there.
func Check(plan *pipeline.Plan, opt pipeline.Options) error {
	if plan == nil {
		return errors.New("run: nil plan")
	}
	if opt.Backend == nil {
		if err := plan.CheckCPU(); err != nil {
			return err
		}
		_, err := fileDecoderFor(plan, nil)
		return err
	}
	opt.Notice = nil // Run gives the notice about a chain that stays on the CPU
	_, err := opt.Backend.Bind(plan, opt, true)
	return err
}

// RunOptions returns the options of a run that the settings give (Execution.RunOptions)
// and, on devs (none for the CPU), the backend with the GPUs' streams, batch, page-locked
// budget and gpu_wait, each GPU's; under device auto a GPU that fails to finish opening
// leaves the run on the CPU (Options.Optional).
func RunOptions(e pipeline.Execution, devs ...sched.Device) pipeline.Options {
	opt := e.RunOptions()
	if len(devs) > 0 {
		o := &Options{Streams: e.Streams, Batch: e.Batch, PinnedBytes: int64(e.PinnedMB) << 20,
			Wait: e.GPUWait, Optional: e.Device == "auto"}
		if len(devs) == 1 {
			o.Device = devs[0] // exactly a one-GPU run
		} else {
			o.Devices = devs
		}
		opt.Backend = o
	}
	return opt
}

// gpuRun is a checked GPU configuration for one plan.
type gpuRun struct {
	devs     []sched.Device
	pools    []pools // Options.pools
	cfg      sched.Config
	optional bool // Options.Optional
	wait     bool // Options.Wait, or the CPU cannot start the run (newGPURun)
	// inputs is Options.Inputs when the run may leave its devices unstarted (Optional,
	// not wait), else 0.
	inputs int
	// files is the first device's file decoder when the decode backend sends files to it
	// (deviceDecoder), else nil: it routes the files for every device.
	files sched.FileDecoder
	// jpeg is, per device, its JPEG encoder when the save stage writes JPEG there
	// (jpegEncoderFor), else nil.
	jpeg []sched.JPEGEncoder
}

// newGPURun checks o against plan and sizes the executor (see Options.Bind); notice, if
// set, receives the notice of a chain that stays on the CPU.
func newGPURun(plan *pipeline.Plan, o *Options, notice func(string), encode bool) (*gpuRun, error) {
	devs, err := o.devices()
	if err != nil {
		return nil, err
	}
	// Inputs may run on the CPU while the devices open only where the CPU gives the device's
	// bits: every stage runs there, and no decode asks for nvJPEG's pixels.
	wait := o.Wait || plan.CheckCPU() != nil || plan.Decode != nil && plan.Decode.Backend == pipeline.DecodeNvJPEG
	g := &gpuRun{devs: devs, pools: o.pools, optional: o.Optional, wait: wait}
	if o.Optional && !wait {
		g.inputs = o.Inputs
	}
	ops, err := deviceOps(plan, devs[0], encode)
	if err != nil {
		if plan.Decode.Backend == pipeline.DecodeNvJPEG {
			return nil, fmt.Errorf("%w: the chain runs on the CPU (%v)", ErrNoDeviceDecoder, err)
		}
		if notice != nil {
			notice(fmt.Sprintf("the chain cannot run on %s (%v); running it on the CPU", g.name(), err))
		}
		return nil, nil
	}
	if err := sameOnEvery(plan, devs, ops, encode); err != nil {
		return nil, err
	}
	// A negative Linger would make the executor's batch timer fire never or at once
	// in a loop; it is refused with the other negative settings.
	if o.Streams < 0 || o.Batch < 0 || o.Slots < 0 || o.SlotBytes < 0 || o.PinnedBytes < 0 || o.Linger < 0 {
		return nil, fmt.Errorf("run: negative GPU setting (streams %d, batch %d, slots %d, slot bytes %d, pinned bytes %d, linger %v)",
			o.Streams, o.Batch, o.Slots, o.SlotBytes, o.PinnedBytes, o.Linger)
	}
	for _, dev := range devs {
		g.jpeg = append(g.jpeg, jpegEncoderFor(plan, dev))
	}
	if g.files, err = fileDecoderFor(plan, devs[0]); err != nil {
		return nil, err
	}
	if g.cfg, err = g.config(plan, o, ops); err != nil {
		return nil, err
	}
	return g, nil
}

// config is the executors' configuration for ops with o's settings. Every default is
// filled here (the executor gets a complete configuration), and streams and batch are
// checked by the execution settings table, as the CLI and a job's are; slots only against
// the executor's limit. It may drop g.files, for a segment that returns no image.
func (g *gpuRun) config(plan *pipeline.Plan, o *Options, ops []sched.Op) (sched.Config, error) {
	// A run whose JPEGs decode scaled opens nvJPEG only when a file needs it (decodesScaled):
	// without turbo-cuda, its batches are sized and warmed as for pixels.
	lazy := decodesScaled(plan.Decode)
	batchFiles := g.files
	if lazy {
		batchFiles = nil
	}
	// backend=auto sends baseline JPEGs to the device's turbo-cuda decoder when it has one: it
	// needs no warm-up, and nvJPEG opens only for a file that needs it.
	if td, ok := g.files.(sched.TurboDecoder); ok && plan.Decode.Backend == pipeline.DecodeAuto {
		lazy = true
		if o.Batch == 0 {
			o.Batch = td.TurboBatch()
		}
	}
	cfg := sched.Config{Ops: ops, Streams: cmp.Or(o.Streams, pipeline.DefaultStreams), Batch: gpuBatch(o.Batch, batchFiles),
		SlotBytes: o.SlotBytes, Linger: cmp.Or(o.Linger, DefaultLinger)}
	cfg.Slots = cmp.Or(o.Slots, DefaultSlots(cfg.Streams))
	if pipeline.CheckSetting("streams", cfg.Streams) != nil || pipeline.CheckSetting("batch", cfg.Batch) != nil || cfg.Slots > sched.MaxSlots {
		return cfg, fmt.Errorf("run: GPU settings out of range: streams %d (max %d), batch %d (max %d), slots %d (max %d)",
			cfg.Streams, settingMax("streams"), cfg.Batch, settingMax("batch"), cfg.Slots, sched.MaxSlots)
	}
	if g.files != nil && !slices.ContainsFunc(ops, func(op sched.Op) bool { return !op.Hist }) {
		// Histograms only: a decoded image would stay on the device, and the sink needs it.
		if plan.Decode.Backend == pipeline.DecodeNvJPEG {
			return cfg, fmt.Errorf("%w: %q returns no image from the device", ErrNoDeviceDecoder, sched.SegmentString(ops))
		}
		g.files = nil
	}
	files := g.files != nil
	if o.PinnedBytes > 0 {
		cfg.MaxHostBytes = o.PinnedBytes
		if cfg.SlotBytes == 0 {
			var err error
			if cfg.SlotBytes, err = slotBytesFor(g.devs[0], cfg, o.PinnedBytes, files); err != nil {
				return cfg, err
			}
		}
	}
	cfg.SlotBytes = cmp.Or(cfg.SlotBytes, DefaultSlotBytes(cfg.Batch))
	cfg = withHostBuffers(cfg, files)
	// Files go to the device: warm its decoder up while the first files are read.
	cfg.WarmDecoder = files && !lazy
	return cfg, nil
}

// settingMax is the upper bound of the execution setting called name, an Int with a range.
func settingMax(name string) int64 {
	ps, err := pipeline.ExecutionSetting(name)
	if err != nil || ps.Range == nil {
		panic("gpu: no range for execution setting " + name)
	}
	return int64(ps.Range.Max)
}

// deviceOps are the plan's pixel stages as device ops, and its save stage's encoding op
// when it has one that dev runs: then the device encodes each file and only the files
// come back.
func deviceOps(plan *pipeline.Plan, dev sched.Device, encode bool) ([]sched.Op, error) {
	ops, err := plan.DeviceOps()
	if err != nil {
		return nil, err
	}
	if encode && plan.Save != nil && plan.Save.DeviceOp != nil && dev.CheckOp(*plan.Save.DeviceOp) == nil {
		ops = append(ops, *plan.Save.DeviceOp)
	}
	return ops, nil
}
