package folderrun

import (
	"context"
	"errors"
	"os"
	"strings"

	"github.com/imgpipe/imgpipe/blobio"
	"github.com/imgpipe/imgpipe/cudastage"
	"github.com/imgpipe/imgpipe/cudastage/cu"
	"github.com/imgpipe/imgpipe/cudastage/sched"
	"github.com/imgpipe/imgpipe/pipeline"
	"github.com/imgpipe/imgpipe/pipeline/gpu"
)

// This file is the package's device choice and opening: which GPUs a run uses, how they
// are opened and closed, and the device checks made before anything is written.

// GPUs says how GPUs are found and opened; the zero value uses the CUDA driver.
type GPUs struct {
	// Open opens GPU ordinal, returning it and the function that closes it; nil is
	// cudastage.Open.
	Open func(ordinal int) (sched.Device, func() error, error)
	// List lists the driver's GPUs, for gpu: all; nil is cudastage.Devices.
	List func() ([]cudastage.DeviceInfo, error)
	// Wait waits for each GPU to finish opening, so that one the driver cannot open is one
	// of OpenDevices' failures (bench, and the queue worker, which runs many times on
	// them). Otherwise a GPU run starts on the CPU and finds out meanwhile
	// (gpu.Options).
	Wait bool
	// Need, when set, says what requires a GPU ("bench copy needs a GPU"): no usable GPU is
	// then a failure under auto too.
	Need string
}

// Devices are where pixel stages run: GPUs, or the CPU when there are none.
type Devices struct {
	// GPUs are the opened GPUs; none for the CPU.
	GPUs []sched.Device
	// Why says why the CPU is used under device auto; "" otherwise.
	Why     string
	closers []func() error // GPUs[i]'s is closers[i]
}

// OpenDevices turns the device setting (and the gpu one) into where pixel stages run.
// cpu never touches CUDA. cuda opens the GPUs of set or fails saying why (a *RunError).
// auto opens them, or when no GPU works runs on the CPU, saying so once through notice. An
// ordinal the driver does not have fails under auto too: the user named a GPU, and running
// elsewhere would hide the mistake. AllGPUs is every GPU the driver lists. A GPU that fails
// to open closes those opened before it. cuda starts opening the GPUs at once; auto leaves
// that to the run, which does not start them when the CPU alone finishes sooner
// (gpu.Options.Inputs).
func OpenDevices(device string, set pipeline.GPUSet, g GPUs, notice func(string)) (*Devices, error) {
	cpu := &Devices{}
	if device == "cpu" { // else auto or cuda: the settings table checked it
		return cpu, nil
	}
	open := g.Open
	if open == nil {
		open = func(n int) (sched.Device, func() error, error) { return cudastage.Open(n) }
	}
	ordinals, err := set.Ordinals(), error(nil)
	if set == pipeline.AllGPUs {
		ordinals, err = allOrdinals(g.List)
	}
	d := &Devices{}
	for _, n := range ordinals { // none when listing them failed
		dev, closeDev, openErr := open(n)
		if s, ok := dev.(sched.Starter); ok && openErr == nil {
			switch {
			case g.Wait:
				if openErr = s.OpenErr(); openErr != nil {
					closeDev()
				}
			case device == "cuda":
				s.Start() // meanwhile the run gets ready; auto leaves it to the run (gpu.Options.Inputs)
			}
		}
		if err = openErr; err != nil {
			d.Close()
			break
		}
		d.GPUs, d.closers = append(d.GPUs, dev), append(d.closers, closeDev)
	}
	switch {
	case errors.Is(err, cudastage.ErrNoSuchGPU):
		return nil, noSuchGPU(err)
	case err != nil && g.Need != "":
		return nil, failf("%s, and none is usable: %s", g.Need, GPUReason(err))
	case err != nil && device == "cuda":
		return nil, failf("--device cuda: no usable GPU: %s", GPUReason(err))
	case err != nil:
		// One short line: the whole reason (a loader's list of places tried) is what
		// 'imgpipe devices' is for.
		if notice != nil {
			notice("no usable GPU (" + ShortGPUReason(err) + "); running on the CPU ('imgpipe devices' says why)")
		}
		cpu.Why = GPUReason(err)
		return cpu, nil
	}
	return d, nil
}

// Close closes the GPUs OpenDevices opened; on the CPU there is nothing to close. A GPU
// still opening (the CPU did the whole run meanwhile) is closed in the background rather
// than waited for: the process may end first, which ends the driver's work on it.
func (d *Devices) Close() error {
	var errs []error
	for i, c := range d.closers {
		if !sched.Opened(d.GPUs[i]) {
			go c()
			continue
		}
		errs = append(errs, c())
	}
	return errors.Join(errs...)
}

// allOrdinals are the ordinals of every GPU list (nil: the driver's) gives; none is an
// error saying why.
func allOrdinals(list func() ([]cudastage.DeviceInfo, error)) ([]int, error) {
	if list == nil {
		list = cudastage.Devices
	}
	infos, err := list()
	if err == nil && len(infos) == 0 {
		err = errors.New("the CUDA driver reports no device")
	}
	ordinals := make([]int, len(infos))
	for i, d := range infos {
		ordinals[i] = d.Index
	}
	return ordinals, err
}

// devices opens the request's devices: those it brings, or those Exec names. A chain
// without pixel stages leaves a GPU nothing to do: auto does not even load the driver then.
func (p *Prepared) devices() (*Devices, error) {
	if p.req.Devices != nil {
		return &Devices{GPUs: p.req.Devices}, nil // the caller's to close
	}
	device := p.req.Exec.Device
	if device == "auto" && len(p.req.Plan.Pixels) == 0 {
		device = "cpu"
	}
	return OpenDevices(device, p.req.Exec.GPU, p.req.GPUs, p.req.Notice)
}

// gpuOptions checks the run's options on its devices. On a GPU, settings that cannot work
// together (a batch whose slots do not fit in pinned_mb) are bad requests, found before
// anything is written. Under auto, a run that does not wait for its GPUs first counts its
// inputs (countForGPU), so that a GPU that starts at once (as under cuda) starts as early.
func (p *Prepared) gpuOptions(ctx context.Context, opt *pipeline.Options, devs *Devices) error {
	g, onGPU := opt.Backend.(*gpu.Options)
	if onGPU && g.Optional && !g.Wait && p.req.Work == nil {
		countForGPU(ctx, p.in, g, devs, gpuCountLimit)
		p.gpuInputs = g.Inputs
	}
	err := gpu.Check(p.req.Plan, *opt)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, cudastage.ErrNoSuchGPU):
		return noSuchGPU(err)
	case errors.Is(err, gpu.ErrNoDeviceDecoder) && onGPU:
		return failf("%v", err) // a GPU that cannot load nvJPEG: a runtime problem
	}
	return badf("%v", err)
}

// gpuCountLimit is the most inputs a run under auto counts before it starts (see
// gpu.Options.Inputs); a larger one starts the GPU at once. A local walk costs a
// few microseconds a file, so a thousand stays well under what the GPU saves a run of that
// size.
const gpuCountLimit = 1000

// countForGPU lets a run under auto leave its GPUs unstarted when the CPU alone finishes
// sooner (gpu.Options.Inputs), which needs a count of its inputs: it counts a
// local walk up to limit. With more inputs (a folder with more entries than limit is not
// walked: its names are cheaper to read than its files' information), or inputs in a
// bucket, it starts the GPUs at once, as cuda does.
func countForGPU(ctx context.Context, in *inputs, o *gpu.Options, devs *Devices, limit int) {
	switch {
	case blobio.IsURL(in.dir), len(in.files) > limit, in.dir != "" && moreEntries(in.dir, limit):
	default:
		if n := in.countUpTo(ctx, limit); n >= 0 && n <= limit {
			o.Inputs = n
			return
		}
	}
	sched.Start(devs.GPUs...)
}

// moreEntries reports whether folder dir has more than n entries, reading names only.
func moreEntries(dir string, n int) bool {
	f, err := os.Open(dir)
	if err != nil {
		return false // the walk says why
	}
	defer f.Close()
	names, _ := f.Readdirnames(n + 1)
	return len(names) > n
}

// runDeviceError is the failure of a run that found, while it started on the CPU, that a
// GPU it names does not exist; nil for any other error.
func runDeviceError(err error) error {
	if errors.Is(err, cudastage.ErrNoSuchGPU) {
		return noSuchGPU(err)
	}
	return nil
}

// noSuchGPU is the failure for a gpu setting that names no GPU the driver sees; err
// (cudastage's) already says how many there are.
func noSuchGPU(err error) error {
	return failf("%s; 'imgpipe devices' lists them", GPUReason(err))
}

// ShortGPUReason is the gist of why a GPU cannot be used: the driver's sentinel (no libcuda, no
// device, too old) when err is one, else its first clause.
func ShortGPUReason(err error) string {
	for _, s := range []error{cu.ErrNoDriver, cu.ErrNoDevice, cu.ErrDriverTooOld} {
		if errors.Is(err, s) {
			return s.Error()
		}
	}
	r, _, _ := strings.Cut(GPUReason(err), ": ")
	return r
}

// GPUReason formats why a GPU cannot be used, without the empty detail some loader errors
// end with ("...not found (is the NVIDIA driver installed?): ").
func GPUReason(err error) string {
	return strings.TrimRight(err.Error(), ": ")
}
