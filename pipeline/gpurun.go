package pipeline

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/imgpipe/imgpipe/cudastage/devmem"
	"github.com/imgpipe/imgpipe/cudastage/sched"
	"github.com/imgpipe/imgpipe/memory/pinned"
	"github.com/imgpipe/imgpipe/stages"
	"github.com/imgpipe/imgpipe/stages/jpegturbo"
	"github.com/imgpipe/imgpipe/stages/progressive"
)

// GPUOptions runs a plan's pixel stages on an accelerator as one device segment: decode
// workers decode each input straight into a page-locked slot of a sched.Executor, which
// runs batches of images on Streams streams, overlapping one batch's upload, another's
// kernels and a third's download; save workers encode the results from page-locked memory
// and release the slots. Memory is bounded by Slots × the slot size.
//
// An image too large for a slot runs on the CPU path instead, in its decode worker (same
// bits; Summary.CPUFallback counts them). A decode error fails only its input, never the
// batch. A device error is fatal to the run: batches on the device are abandoned and Run
// returns the error; outputs already written are complete.
type GPUOptions struct {
	// Device is the accelerator: a CUDA GPU (cudastage.NewDevice) or schedtest.NewFake. Run
	// neither opens nor closes it.
	Device sched.Device
	// Devices, instead of Device, spreads the run over several accelerators (see
	// multigpu.go): the settings below are each one's, and HostPool and DevicePool must
	// be nil.
	Devices []sched.Device
	// Streams is the number of device streams; 0 means DefaultStreams. Its range is the
	// streams execution setting's.
	Streams int
	// Batch is the most images per batch; 0 means DefaultBatch, or the device decoder's
	// call size when it decodes the files (see DefaultBatch). Its range is the batch
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
	// the executors are up (see gpustart.go).
	Wait bool
	// Optional lets the run go on on the CPU, with a notice, when a device fails to finish
	// opening in the background (sched.Starter: the CUDA driver finds no device, or cannot
	// create its context); otherwise, and for a device that does not exist
	// (sched.ErrNoSuchDevice), that fails the run. The CLI's --device auto sets it.
	Optional bool
	// Inputs, when positive with Optional, is how many inputs the run has (the caller
	// counted a local folder, say). The run then starts its devices only when the CPU's
	// measured pace says that it would need longer alone than a GPU's start costs (see
	// gpudefer.go); a smaller run never starts them and reports Summary.GPUNotStarted. 0:
	// unknown, and the devices start with the run.
	Inputs int
	// HostPool and DevicePool, when set, are where the slots' page-locked and device
	// memory come from and go back to (sched.Config's fields of those names): runs one
	// after another on Device that share them (a benchmark's repeats) take the memory
	// once, instead of page-locking it again for every run, which also holds up the
	// device while it runs. nil: each run allocates and frees its own.
	HostPool   *pinned.Pool
	DevicePool *devmem.Allocator
}

// gpuRun is a checked GPU configuration for one plan.
type gpuRun struct {
	devs     []sched.Device
	cfg      sched.Config
	optional bool // GPUOptions.Optional
	wait     bool // GPUOptions.Wait, or the CPU cannot start the run (newGPURun)
	// inputs is GPUOptions.Inputs when the run may leave its devices unstarted (Optional,
	// not wait), else 0.
	inputs int
	// files is the first device's file decoder when the decode backend sends files to it
	// (deviceDecoder), else nil: it routes the files for every device.
	files sched.FileDecoder
	// jpeg is, per device, its JPEG encoder when the save stage writes JPEG there
	// (jpegEncoderFor), else nil.
	jpeg []sched.JPEGEncoder
}

// CheckGPU reports whether opt.GPU's settings are usable for plan on opt.GPU.Device, with
// the error Run would return, without starting anything: the CLI calls it before it
// creates the output folder or touches the report, so that a bad setting (a batch whose
// slots do not fit in PinnedBytes, say) is a usage error that leaves no trace. A nil
// opt.GPU is valid.
func CheckGPU(plan *Plan, opt Options) error {
	if plan == nil {
		return errors.New("run: nil plan")
	}
	if opt.GPU == nil {
		if err := plan.CheckCPU(); err != nil {
			return err
		}
		_, err := fileDecoderFor(plan, nil)
		return err
	}
	opt.Notice = nil // Run gives the notice about a chain that stays on the CPU
	_, err := newGPURun(plan, opt, true)
	return err
}

// newGPURun checks opt.GPU against plan and sizes the executor. It returns nil, after
// giving a notice, when the plan's pixel stages cannot run as one device segment: then the
// whole chain runs on the CPU. (Every builtin pixel stage has a GPU implementation, so
// with the builtin registry this only happens for a chain without pixel stages.)
//
// encode allows the save stage's device encoding op (see deviceOps): for sinks that only
// write the output (ToFolder, Discard), since the result then has no image.
func newGPURun(plan *Plan, opt Options, encode bool) (*gpuRun, error) {
	o := opt.GPU
	devs, err := o.devices()
	if err != nil {
		return nil, err
	}
	// Inputs may run on the CPU while the devices open only where the CPU gives the device's
	// bits: every stage runs there, and no decode asks for nvJPEG's pixels.
	wait := o.Wait || plan.CheckCPU() != nil || plan.Decode != nil && plan.Decode.Backend == DecodeNvJPEG
	g := &gpuRun{devs: devs, optional: o.Optional, wait: wait}
	if o.Optional && !wait {
		g.inputs = o.Inputs
	}
	ops, err := deviceOps(plan, devs[0], encode)
	if err != nil {
		if plan.Decode.Backend == DecodeNvJPEG {
			return nil, fmt.Errorf("%w: the chain runs on the CPU (%v)", ErrNoDeviceDecoder, err)
		}
		if opt.Notice != nil {
			opt.Notice(fmt.Sprintf("the chain cannot run on %s (%v); running it on the CPU", g.name(), err))
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
	// Every default is filled here (the executor gets a complete configuration), and
	// streams and batch are checked by the execution settings table, as the CLI and a
	// job's are; slots only against the executor's limit.
	for _, dev := range devs {
		g.jpeg = append(g.jpeg, jpegEncoderFor(plan, dev))
	}
	if g.files, err = fileDecoderFor(plan, devs[0]); err != nil {
		return nil, err
	}
	// A run whose JPEGs decode scaled opens nvJPEG only when a file needs it (decodesScaled):
	// without turbo-cuda, its batches are sized and warmed as for pixels.
	lazy := decodesScaled(plan.Decode)
	batchFiles := g.files
	if lazy {
		batchFiles = nil
	}
	// backend=auto sends baseline JPEGs to the device's turbo-cuda decoder when it has one: it
	// needs no warm-up, and nvJPEG opens only for a file that needs it.
	if td, ok := g.files.(sched.TurboDecoder); ok && plan.Decode.Backend == DecodeAuto {
		lazy = true
		if o.Batch == 0 {
			o.Batch = td.TurboBatch()
		}
	}
	cfg := sched.Config{Ops: ops, Streams: cmp.Or(o.Streams, DefaultStreams), Batch: gpuBatch(o.Batch, batchFiles),
		SlotBytes: o.SlotBytes, Linger: cmp.Or(o.Linger, DefaultLinger), HostPool: o.HostPool, DevicePool: o.DevicePool}
	cfg.Slots = cmp.Or(o.Slots, DefaultSlots(cfg.Streams))
	if CheckSetting("streams", cfg.Streams) != nil || CheckSetting("batch", cfg.Batch) != nil || cfg.Slots > sched.MaxSlots {
		return nil, fmt.Errorf("run: GPU settings out of range: streams %d (max %d), batch %d (max %d), slots %d (max %d)",
			cfg.Streams, settingMax("streams"), cfg.Batch, settingMax("batch"), cfg.Slots, sched.MaxSlots)
	}
	if g.files != nil && !slices.ContainsFunc(ops, func(op sched.Op) bool { return !op.Hist }) {
		// Histograms only: a decoded image would stay on the device, and the sink needs it.
		if plan.Decode.Backend == DecodeNvJPEG {
			return nil, fmt.Errorf("%w: %q returns no image from the device", ErrNoDeviceDecoder, sched.SegmentString(ops))
		}
		g.files = nil
	}
	files := g.files != nil
	if o.PinnedBytes > 0 {
		cfg.MaxHostBytes = o.PinnedBytes
		if cfg.SlotBytes == 0 {
			if cfg.SlotBytes, err = slotBytesFor(devs[0], cfg, o.PinnedBytes, files); err != nil {
				return nil, err
			}
		}
	}
	cfg.SlotBytes = cmp.Or(cfg.SlotBytes, DefaultSlotBytes(cfg.Batch))
	cfg = withHostBuffers(cfg, files)
	// Files go to the device: warm its decoder up while the first files are read.
	cfg.WarmDecoder = files && !lazy
	g.cfg = cfg
	return g, nil
}

// gpuBatch is the batch of a GPU run: batch when set; otherwise, when files go to the
// device's decoder, as many as its calls take (on an H100, 56 files per call decoded 2,732
// 1080p img/s where 14 decoded 2,024: BenchmarkBatchedDecode); else DefaultBatch.
func gpuBatch(batch int, files sched.FileDecoder) int {
	if batch > 0 {
		return batch
	}
	if info, ok := files.(sched.DecoderInfo); ok && info.DecoderBatch() > 0 {
		return min(info.DecoderBatch(), sched.MaxBatch)
	}
	return DefaultBatch
}

// deviceOps are the plan's pixel stages as device ops, and its save stage's encoding op
// when it has one that dev runs: then the device encodes each file and only the files
// come back.
func deviceOps(plan *Plan, dev sched.Device, encode bool) ([]sched.Op, error) {
	ops, err := plan.DeviceOps()
	if err != nil {
		return nil, err
	}
	if encode && plan.Save != nil && plan.Save.DeviceOp != nil && dev.CheckOp(*plan.Save.DeviceOp) == nil {
		ops = append(ops, *plan.Save.DeviceOp)
	}
	return ops, nil
}

// window is the number of inputs a GPU run keeps in flight: enough to fill every slot of
// every device, plus what the decode and save workers hold, so that the reorder buffer
// never starves a device.
func (g *gpuRun) window(workers int) int { return len(g.devs)*g.cfg.Slots*g.cfg.Batch + 2*workers }

// gpuBackend runs the pixel stages on a device executor: decode workers decode each input
// straight into a page-locked slot, save workers store the results.
type gpuBackend struct {
	run *gpuRun
	r   *runner
	// up is closed once the executors started (x and results set), or did not: the run
	// failed, or no device opened (noGPU) under GPUOptions.Optional. See gpustart.go.
	up      chan struct{}
	x       *executors
	results <-chan *sched.Result // every executor's
	noGPU   error                // why no device opened, under GPUOptions.Optional
	// deferred: the devices start only once the run's pace says they are worth it
	// (gpudefer.go); started is closed once they were started, and notStarted is set when
	// the run ended first.
	deferred   bool
	started    chan struct{}
	pace       pace
	notStarted bool

	inExec      sync.Map     // idx → *item: committed to the executor, result not yet taken
	cpuFallback atomic.Int64 // images that ran on the CPU path instead
	cpuStart    atomic.Int64 // inputs that ran wholly on the CPU while the devices opened
	// aside holds the inputs set aside for the devices while they open (setAside), which
	// only a run whose sink keeps no image does (writesOnly); setAsideN counts them.
	aside      asideList
	writesOnly bool
	setAsideN  atomic.Int64

	jpegMu     sync.Mutex
	jpegNotice bool  // a save worker's device JPEG encoder failed to start; said once
	jpegErr    error // errors closing the save workers' device JPEG encoders
}

// toDevice decodes an input straight into a page-locked slot and commits it to its batch.
// It reports whether it did; otherwise the input is finished (failed, skipped, run on the
// CPU path) or, when the executor refused it because the run is ending, dropped. After it
// returns true the item belongs to the save worker that gets its result.
func (b *gpuBackend) toDevice(it *item, w *worker) (committed bool) {
	if b.r.plan.Load != nil {
		return b.arrayToDevice(it, w)
	}
	r := b.r
	if r.settle(it) {
		return false
	}
	res := &it.res
	stage := r.plan.Steps[0].Def.Name
	var file *loaded // read by fileToDevice for the CPU to decode
	if b.run.files != nil && it.in.Image == nil {
		var done, committed bool
		if file, done, committed = b.fileToDevice(it, w); done {
			return committed
		}
	}
	var (
		rsv     *sched.Reservation
		onCPU   bool
		refused error // Reserve failed for another reason than size: the executor stopped
	)
	defer func() {
		if p := recover(); p != nil {
			if rsv != nil {
				rsv.Abort() // the rest of the batch goes on without it
			}
			failWith(res, stage, fmt.Errorf("panic: %v", p))
			committed = false
		}
	}()
	alloc := func(width, height, c int) (*stages.Image, error) {
		if width <= sched.MaxSide && height <= sched.MaxSide {
			rs, err := b.x.reserve(r.ctx, func(e *sched.Executor) (*sched.Reservation, error) {
				return e.Reserve(r.ctx, width, height, c, it)
			})
			if err == nil {
				rsv = rs
				return rs.Image(), nil
			}
			if !errors.Is(err, sched.ErrTooLarge) {
				refused = err
				return nil, err
			}
		}
		onCPU = true
		return w.bufs.get(width, height, c), nil
	}
	t0 := time.Now()
	var (
		img     *stages.Image
		decoder Decoded
		release func()
		err     error
	)
	if file != nil {
		img, decoder, release, err = r.decodeLoaded(*file, alloc)
	} else {
		img, decoder, release, err = r.decodeInto(it.in, alloc)
	}
	r.span(w.track, stage, it.in.Name, t0)
	res.Decoder, res.DecodeScale = decoder.Decoder, decoder.Scale
	if err == nil && !onCPU {
		release() // the pixels are in the batch slot, which the executor's own budget bounds
	} else if err == nil {
		defer release() // held through the CPU chain below
	}
	switch {
	case refused != nil:
		it.dropped = true
		return false
	case err != nil:
		if rsv != nil {
			rsv.Abort()
		}
		if r.ctx.Err() != nil && errors.Is(err, r.ctx.Err()) {
			it.dropped = true // the run ended while it waited for memory: never started
			return false
		}
		failWith(res, stage, err)
		return false
	case onCPU:
		b.cpuFallback.Add(1)
		r.cpuChain(it, w, img, true)
		return false
	case img != rsv.Image():
		rsv.Abort()
		failWith(res, stage, errors.New("decoder returned an image it did not allocate"))
		return false
	}
	b.inExec.Store(it.idx, it)
	committed = true
	rsv.Commit()
	return true
}

// saveWorker stores the executors' results until they finished or stopped, releasing each
// result's slot memory once stored. jpeg is the device JPEG encoder it uses, if any.
func (b *gpuBackend) saveWorker(track string, jpeg sched.JPEGEncoder) {
	r := b.r
	jw := &workerJPEG{b: b, jpeg: jpeg}
	defer jw.close()
	for sr := range b.results {
		it := sr.Tag.(*item)
		b.inExec.Delete(it.idx)
		if r.ctx.Err() != nil || r.after(it.idx) {
			sr.Release()
			it.dropped = true
		} else {
			r.saveResult(it, sr, track, jw.encoder(sr.Image))
			if it.res.Status == StatusFailed && r.opt.StopOnError {
				r.fail(it)
			}
		}
		r.done <- it
	}
}

// saveResult stores one device result. The image lives in the slot's page-locked memory,
// which is released here: a sink that keeps the image (Collect, ToChan without a save
// stage) gets a copy in Go memory. enc, when not nil, is the save worker's device JPEG
// encoder (deviceJPEG).
func (r *runner) saveResult(it *item, sr *sched.Result, track string, enc *Encoder) {
	if r.plan.Load != nil {
		r.saveArrayResult(it, sr, track)
		return
	}
	res := &it.res
	defer sr.Release()
	defer func() {
		if p := recover(); p != nil {
			stage := "sink"
			if r.plan.Save != nil {
				stage = r.plan.Save.Def.Name
			}
			failWith(res, stage, fmt.Errorf("panic: %v", p))
			res.Output = ""
		}
		if res.Image != nil {
			res.Image = cloneImage(res.Image)
		}
	}()
	if sr.Decoder != "" {
		res.Decoder = sr.Decoder
	}
	if sr.Err != nil {
		stage := r.plan.Steps[0].Def.Name // the device could not decode the file
		if errors.Is(sr.Err, sched.ErrEncoderBound) && r.plan.Save != nil {
			stage = r.plan.Save.Def.Name
		}
		failWith(res, stage, sr.Err)
		return
	}
	res.Width, res.Height = sr.In.W, sr.In.H
	res.Histogram = sr.Hist
	res.Image = sr.Image
	if sr.Encoded != nil {
		enc = encodedBy(r.plan.Save.Encoder, sr.Encoded)
	}
	r.store(it, track, enc)
}

// cloneImage copies m into Go memory, tightly packed.
func cloneImage(m *stages.Image) *stages.Image {
	c := stages.NewImage(m.W, m.H, m.C)
	for y := 0; y < m.H; y++ {
		copy(c.Row(y), m.Row(y))
	}
	return c
}

// fileToDevice reads an input's file and, when the routing rule sends it to the device
// decoder (routeFile), commits its bytes to a batch: only the file crosses the link, and
// its charge is given back once the bytes are in the slot. done reports that the input
// was dealt with (committed, failed, or dropped because the run is ending); otherwise
// file, with its charge still held, is for this CPU worker to decode (nil when the input
// has no bytes to read: decodeInto says what is missing).
func (b *gpuBackend) fileToDevice(it *item, w *worker) (file *loaded, done, committed bool) {
	r, res := b.r, &it.res
	if it.in.Data == nil && it.in.Path == "" && it.in.Open == nil {
		return nil, false, false
	}
	t0 := time.Now()
	defer func() {
		if done { // otherwise the CPU path's decode span covers this time too
			r.span(w.track, r.plan.Steps[0].Def.Name, it.in.Name, t0)
		}
	}()
	f, df, done := b.routeFile(it, w, true)
	switch {
	case done:
		return nil, true, false
	case df == nil:
		return &f, false, false
	}
	rsv, err := b.x.reserve(r.ctx, func(e *sched.Executor) (*sched.Reservation, error) {
		return e.ReserveFile(r.ctx, df.want, it)
	})
	switch {
	case errors.Is(err, sched.ErrTooLarge):
		return &f, false, false // too large for a slot: the CPU decodes it, then the usual path
	case err != nil:
		f.drop()
		it.dropped = true // the executor stopped: the run is ending
		return nil, true, false
	}
	copy(rsv.Bytes(), df.data)
	f.drop()
	res.Decoder = df.want.Decoder
	if df.scale > 1 {
		res.DecodeScale = scaleName(df.scale)
	}
	b.inExec.Store(it.idx, it)
	rsv.Commit()
	return nil, true, true
}

// deviceFile is an input file that the device decodes whole: the bytes that cross the
// link (the file's, or its sequential rewrite in the worker's buffer), what its slot
// holds, and the scale it is decoded at (1: whole).
type deviceFile struct {
	data  []byte
	want  sched.File
	scale int
}

// routeFile reads an input's file (load: the memory budget is charged as for any decode,
// and a file far larger than its pixels is refused unread) and decides by the routing rule
// (deviceDecoder) whether the device decodes it whole. The file is checked as the CPU
// decoder would check it (pixel limit, size, JPEG scan limit) first. It returns the file,
// its charge held, and the device's share, or nil when the CPU decodes it; done when the
// input failed or, the run ending, was dropped (nothing is held then). rewrite allows the
// sequential rewrite of a progressive JPEG, CPU work that setAside leaves to the CPU path.
func (b *gpuBackend) routeFile(it *item, w *worker, rewrite bool) (f loaded, df *deviceFile, done bool) {
	r, res, dec := b.r, &it.res, b.r.plan.Decode
	stage := r.plan.Steps[0].Def.Name
	f, err := r.load(it.in)
	if err != nil {
		if r.ctx.Err() != nil && errors.Is(err, r.ctx.Err()) {
			it.dropped = true // the run ended while it waited for memory: never started
			return f, nil, true
		}
		failWith(res, stage, err)
		return f, nil, true
	}
	data := f.data
	if dec.Header == nil || data == nil || stages.Sniff(data) != "jpeg" { // nil: streamed, not a JPEG
		return f, nil, false
	}
	hd, err := dec.Header(data)
	if err != nil {
		f.drop()
		failWith(res, stage, err)
		return f, nil, true
	}
	scale := 1 // as the CPU run decodes it, and its report says
	if decodesScaled(dec) {
		scale = dec.Scale(hd.W, hd.H)
	}
	// On sides of a few pixels libjpeg-turbo applies a larger scale of the same size, which
	// the device applies too when it is one of its own; else the CPU workers decode the file.
	idct, ok := jpegturbo.AppliedDenom(hd.W, hd.H, scale)
	td, isTurbo := b.run.files.(sched.TurboDecoder)
	turbo := func() string {
		if isTurbo && ok {
			return td.TurboRoute(data)
		}
		return ""
	}
	isProgressive := stages.JPEGProgressive(data)
	route := deviceDecoder(dec.Backend, scale > 1, isProgressive, turbo, func() string { return b.run.files.DecodeRoute(data) })
	// A progressive JPEG at 1/8 goes to turbo-cuda rewritten as a sequential one with the
	// same coefficients, where the decode reads them (package progressive): the same pixels,
	// and the GPU decodes the rewrite that a CPU worker would otherwise decode too (stages'
	// decodeTurbo). At 1/4 the rewrite costs about what libjpeg-turbo's whole decode does
	// (0.80 against 0.77 s, 52 photos, 2 cores), and sending such files to the GPU as well
	// did not change thumbnail runs on an H200, so the CPU workers decode them.
	if rewrite && route == "" && isProgressive && isTurbo && ok && idct == 8 && dec.Backend == DecodeAuto {
		if seq, err := progressive.Sequential(w.seq[:0], data, idct); err == nil {
			w.seq = seq
			if r := td.TurboRoute(seq); r != "" {
				data, route = seq, r
			}
		}
	}
	sw, sh := jpegturbo.ScaledSize(hd.W, hd.H, scale)
	shape := sched.Shape{W: sw, H: sh, C: 3}
	if route == "" || sched.CheckShape(shape) != nil {
		return f, nil, false
	}
	return f, &deviceFile{data: data, scale: scale,
		want: sched.File{Size: len(data), Shape: shape, Orient: hd.Orientation, Scale: idct, Decoder: route}}, false
}
