package gpu

import (
	"errors"
	"fmt"
	"time"

	"github.com/imgpipe/imgpipe/cudastage/sched"
	"github.com/imgpipe/imgpipe/pipeline"
	"github.com/imgpipe/imgpipe/stages"
	"github.com/imgpipe/imgpipe/stages/jpegturbo"
	"github.com/imgpipe/imgpipe/stages/progressive"
)

// Where files decode on a GPU run: the decode stage's backend (pipeline.DecodeBackend)
// and the routing rule (deviceDecoder), and how a file the device decodes whole reaches
// its slot (fileToDevice).

// ErrNoDeviceDecoder is wrapped by the validation error of decode backend=nvjpeg on a run
// that has no usable device decoder. The CLI exits 2 when the run is on the CPU (a usage
// error) and 3 on a GPU that cannot load nvJPEG (a runtime one).
var ErrNoDeviceDecoder = errors.New("decode backend=nvjpeg needs a GPU with nvJPEG")

// deviceDecoder is THE routing rule of a GPU run: given the decode backend, whether the
// JPEG decodes at a DCT scale (scaled: decode scale=... resolved to 1/2, 1/4 or 1/8, see
// decodesScaled), whether it is progressive, and the device decoders that would take it
// (turbo: TurboDecoder.TurboRoute; route: FileDecoder.DecodeRoute, "nvjpeg-hw",
// "nvjpeg-cuda" or "", asked only when the answer depends on it: it parses the file, and
// opens nvJPEG on first use), it names the device decoder that decodes it, or "" for the CPU
// decoders (DecodeBackend.CPU). auto sends a baseline JPEG to the device's turbo-cuda
// decoder when it takes it, scaled or not (libjpeg-turbo's bytes at libjpeg-turbo's scales,
// and faster than the engines), and otherwise only what the hardware engines take (the CUDA
// decoder is slower than libjpeg-turbo on CPU workers for progressive files), and only at
// full size: the engines do not give libjpeg-turbo's scaled pixels, which libjpeg-turbo's
// scaled decode on the CPU workers gives faster. The engines decode baseline JPEGs only, so
// auto does not ask about a progressive one: asking opens nvJPEG, which holds a run up.
// nvjpeg sends every file the device accepts, at full size; go and turbo never use it.
// The measurements behind each choice are in bench/results/2026-12-07-code-comments.md.
func deviceDecoder(backend pipeline.DecodeBackend, scaled, progressive bool, turbo, route func() string) string {
	switch backend {
	case pipeline.DecodeAuto:
		if r := turbo(); r != "" {
			return r
		}
		if scaled || progressive {
			return ""
		}
		if route() == sched.RouteHW {
			return sched.RouteHW
		}
	case pipeline.DecodeNvJPEG:
		return route()
	}
	return ""
}

// decodesScaled reports whether dec decodes JPEGs at a DCT scale on a GPU run as on the CPU:
// backend=auto, a scale, and libjpeg-turbo loaded (Go's decoder does not scale). On the GPU,
// turbo-cuda decodes them at that scale; the others decode scaled on the CPU workers (see
// deviceDecoder). Such a run, a thumbnail job, opens nvJPEG only at the first JPEG that
// needs it: opening and warming nvJPEG up costs a second or more, which a folder of
// baseline photos would pay for nothing (bench/results/2026-12-07-code-comments.md).
func decodesScaled(dec *pipeline.Decoder) bool {
	return dec != nil && dec.Backend == pipeline.DecodeAuto && dec.Scale != nil && dec.CPUJPEG == string(stages.JPEGTurbo)
}

// fileDecoderFor returns the device decoder a GPU run on dev uses for plan's decode
// stage: nil when the backend never uses one, or auto finds none; an error wrapping
// ErrNoDeviceDecoder when backend=nvjpeg finds none (dev is nil on a CPU run).
func fileDecoderFor(plan *pipeline.Plan, dev sched.Device) (sched.FileDecoder, error) {
	if plan.Decode == nil {
		return nil, nil // an array chain: no files to decode
	}
	b := plan.Decode.Backend
	if b != pipeline.DecodeAuto && b != pipeline.DecodeNvJPEG {
		return nil, nil
	}
	if dev == nil {
		if b == pipeline.DecodeNvJPEG {
			return nil, fmt.Errorf("%w: this run is on the CPU (use backend=auto, go or turbo there)", ErrNoDeviceDecoder)
		}
		return nil, nil
	}
	if decodesScaled(plan.Decode) {
		// Not opened here (FileDecoderOf would): without nvJPEG, DecodeRoute answers ""
		// and every file decodes on the CPU, as auto does anyway.
		fd, _ := dev.(sched.FileDecoder)
		return fd, nil
	}
	fd, err := sched.FileDecoderOf(dev)
	if di, ok := dev.(sched.DecoderInfo); ok && err == nil && b == pipeline.DecodeNvJPEG {
		// FileDecoderOf takes a TurboDecoder as usable without nvJPEG; nvjpeg needs it.
		if e := di.DecoderAvailable(); e != nil {
			err = fmt.Errorf("%s cannot decode files: %w", dev.Name(), e)
		}
	}
	if err != nil && b == pipeline.DecodeNvJPEG {
		return nil, fmt.Errorf("%w: %v", ErrNoDeviceDecoder, err)
	}
	return fd, nil
}

// fileToDevice reads an input's file and, when the routing rule sends it to the device
// decoder (routeFile), commits its bytes to a batch: only the file crosses the link, and
// its charge is given back once the bytes are in the slot. done reports that the input
// was dealt with (committed, failed, or dropped because the run is ending); otherwise
// file, with its charge still held, is for this CPU worker to decode (nil when the input
// has no bytes to read: decodeInto says what is missing).
func (b *gpuBackend) fileToDevice(it *pipeline.Item, w *worker) (file *pipeline.Loaded, done, committed bool) {
	r, res, in := b.r, it.Result(), it.Input()
	if in.Data == nil && in.Path == "" && in.Open == nil {
		return nil, false, false
	}
	t0 := time.Now()
	defer func() {
		if done { // otherwise the CPU path's decode span covers this time too
			r.Span(w.Track(), r.Plan().Steps[0].Def.Name, in.Name, t0)
		}
	}()
	f, df, done := b.routeFile(it, w, true)
	switch {
	case done:
		return nil, true, false
	case df == nil:
		return &f, false, false
	}
	rsv, err := b.x.reserve(r.Context(), func(e *sched.Executor) (*sched.Reservation, error) {
		return e.ReserveFile(r.Context(), df.want, it)
	})
	switch {
	case errors.Is(err, sched.ErrTooLarge):
		return &f, false, false // too large for a slot: the CPU decodes it, then the usual path
	case err != nil:
		f.Drop()
		it.Drop() // the executor stopped: the run is ending
		return nil, true, false
	}
	copy(rsv.Bytes(), df.data)
	f.Drop()
	res.Decoder = df.want.Decoder
	if df.scale > 1 {
		res.DecodeScale = pipeline.ScaleName(df.scale)
	}
	b.inExec.Store(it.Index(), it)
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
func (b *gpuBackend) routeFile(it *pipeline.Item, w *worker, rewrite bool) (f pipeline.Loaded, df *deviceFile, done bool) {
	r, dec := b.r, b.r.Plan().Decode
	stage := r.Plan().Steps[0].Def.Name
	f, err := r.Load(it.Input())
	if err != nil {
		if ctx := r.Context(); ctx.Err() != nil && errors.Is(err, ctx.Err()) {
			it.Drop() // the run ended while it waited for memory: never started
			return f, nil, true
		}
		it.Fail(stage, err)
		return f, nil, true
	}
	data := f.Data()
	if dec.Header == nil || data == nil || stages.Sniff(data) != "jpeg" { // nil: streamed, not a JPEG
		return f, nil, false
	}
	hd, err := dec.Header(data)
	if err != nil {
		f.Drop()
		it.Fail(stage, err)
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
	// decodeTurbo). At 1/4 the rewrite costs about what libjpeg-turbo's whole decode does,
	// and sending such files to the GPU as well did not speed thumbnail runs up, so the CPU
	// workers decode them (figures in bench/results/2026-12-07-code-comments.md).
	if rewrite && route == "" && isProgressive && isTurbo && ok && idct == 8 && dec.Backend == pipeline.DecodeAuto {
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
