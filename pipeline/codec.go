package pipeline

import (
	"errors"
	"fmt"
	"io"

	"github.com/imgpipe/imgpipe/cudastage/sched"
	"github.com/imgpipe/imgpipe/stages"
	"github.com/imgpipe/imgpipe/stages/jpegturbo"
)

// Where files decode and encode on a GPU run: the decode stage's backends, the routing
// rule, and the device encoding op of save format=png compression=fast.

// DecodeBackend is the decode stage's backend parameter: which JPEG decoder the CPU uses,
// and where files decode on a GPU run (see package pipeline/gpu).
type DecodeBackend string

// The decode stage's backends: the CPU's JPEG decoders (stages.JPEGBackends), then nvjpeg.
const (
	// DecodeAuto (stages.JPEGAuto): on a GPU run, JPEGs the device's decoders take decode
	// there, the rest on the CPU; on the CPU, libjpeg-turbo when it loads, else Go's decoder.
	DecodeAuto = DecodeBackend(stages.JPEGAuto)
	// DecodeGo (stages.JPEGGo): Go's decoder, on the CPU, on every run.
	DecodeGo = DecodeBackend(stages.JPEGGo)
	// DecodeTurbo (stages.JPEGTurbo): libjpeg-turbo, on the CPU, on every run.
	DecodeTurbo = DecodeBackend(stages.JPEGTurbo)
	// DecodeNvJPEG: every JPEG the device decoder takes decodes there (other formats on
	// the CPU); a run without nvJPEG fails at validation.
	DecodeNvJPEG DecodeBackend = "nvjpeg"
)

// decodeBackends are the decode stage's backend values, in the order its help lists them.
func decodeBackends() []string {
	var names []string
	for _, b := range []DecodeBackend{DecodeAuto, DecodeGo, DecodeTurbo, DecodeNvJPEG} {
		names = append(names, string(b))
	}
	return names
}

// scaleAuto is decode scale=auto: the resize after decode picks the scale (bindDecodeScale).
const scaleAuto = "auto"

// decodeScales are the decode stage's scale values: "1", "1/2", "1/4", "1/8" (the DCT
// scales libjpeg-turbo decodes, jpegturbo.ScaleDenoms) and auto.
func decodeScales() []string {
	var names []string
	for _, d := range jpegturbo.ScaleDenoms {
		names = append(names, scaleName(d))
	}
	return append(names, scaleAuto)
}

// scaleName writes a scale denominator as the decode stage's value and the report's
// decode_scale do: "1/4"; "1" for full size.
func scaleName(denom int) string {
	if denom <= 1 {
		return "1"
	}
	return fmt.Sprintf("1/%d", denom)
}

// scaleDenom reads a scale value back: 4 for "1/4", 1 for "1" and for auto (which
// bindDecodeScale resolves per image).
func scaleDenom(name string) int {
	for _, d := range jpegturbo.ScaleDenoms {
		if scaleName(d) == name {
			return d
		}
	}
	return 1
}

// ErrNoDeviceDecoder is wrapped by the validation error of decode backend=nvjpeg on a run
// that has no usable device decoder. The CLI exits 2 when the run is on the CPU (a usage
// error) and 3 on a GPU that cannot load nvJPEG (a runtime one).
var ErrNoDeviceDecoder = errors.New("decode backend=nvjpeg needs a GPU with nvJPEG")

// CPU is the JPEG decoder of the CPU path, and of the files a GPU run decodes on CPU
// workers, for backend b: nvjpeg's CPU side is auto's, which stages.ResolveJPEGBackend
// resolves (libjpeg-turbo when it loads, else Go's).
func (b DecodeBackend) CPU() stages.JPEGBackend {
	if b == DecodeNvJPEG {
		return stages.JPEGAuto
	}
	return stages.JPEGBackend(b)
}

// deviceDecoder is THE routing rule of a GPU run: given the decode backend, whether the
// JPEG decodes at a DCT scale (scaled: decode scale=... resolved to 1/2, 1/4 or 1/8, see
// decodesScaled), whether it is progressive, and the device decoders that would take it
// (turbo: TurboDecoder.TurboRoute; route: FileDecoder.DecodeRoute, "nvjpeg-hw",
// "nvjpeg-cuda" or "", asked only when the answer depends on it: it parses the file, and
// opens nvJPEG on first use), it names the device decoder that decodes it, or "" for the CPU
// decoders (cpuJPEG). auto sends a baseline JPEG to the device's turbo-cuda decoder when it
// takes it, scaled or not (libjpeg-turbo's bytes at libjpeg-turbo's scales, and faster than
// the engines), and otherwise only what the hardware engines take (their batched decode was
// measured at 2,800 img/s on an H200; the CUDA decoder is slower than libjpeg-turbo on CPU
// workers for progressive files — set by measurement on the GPU host), and only at full
// size: the engines do not give libjpeg-turbo's scaled pixels, and libjpeg-turbo's scaled
// decode on the CPU workers beat their full one for 256-pixel thumbnails of 1,800 photos on
// an H200 (3.5 against 5.0 s end to end in one lease). The engines decode baseline JPEGs
// only, so auto does not ask about a progressive one: asking opened nvJPEG, which held up a
// run of 600 photos, 6 of their 33 originals progressive, by about 0.7 s on an H200 (1.38 to
// 1.52 s, then 0.69 to 0.83 s). nvjpeg sends every file the device accepts, at full size; go
// and turbo never use it.
func deviceDecoder(backend DecodeBackend, scaled, progressive bool, turbo, route func() string) string {
	switch backend {
	case DecodeAuto:
		if r := turbo(); r != "" {
			return r
		}
		if scaled || progressive {
			return ""
		}
		if route() == "nvjpeg-hw" {
			return "nvjpeg-hw"
		}
	case DecodeNvJPEG:
		return route()
	}
	return ""
}

// decodesScaled reports whether dec decodes JPEGs at a DCT scale on a GPU run as on the CPU:
// backend=auto, a scale, and libjpeg-turbo loaded (Go's decoder does not scale). On the GPU,
// turbo-cuda decodes them at that scale; the others decode scaled on the CPU workers (see
// deviceDecoder). Such a run, a thumbnail job, opens nvJPEG only at the first JPEG that
// needs it: opening and warming nvJPEG up took about 1.3 s of a run on an H200 (2.1 against
// 0.96 s for one file), which a folder of baseline photos would pay for nothing.
func decodesScaled(dec *Decoder) bool {
	return dec != nil && dec.Backend == DecodeAuto && dec.Scale != nil && dec.CPUJPEG == string(stages.JPEGTurbo)
}

// fileDecoderFor returns the device decoder a GPU run on dev uses for plan's decode
// stage: nil when the backend never uses one, or auto finds none; an error wrapping
// ErrNoDeviceDecoder when backend=nvjpeg finds none (dev is nil on a CPU run).
func fileDecoderFor(plan *Plan, dev sched.Device) (sched.FileDecoder, error) {
	if plan.Decode == nil {
		return nil, nil // an array chain: no files to decode
	}
	b := plan.Decode.Backend
	if b != DecodeAuto && b != DecodeNvJPEG {
		return nil, nil
	}
	if dev == nil {
		if b == DecodeNvJPEG {
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
	if di, ok := dev.(sched.DecoderInfo); ok && err == nil && b == DecodeNvJPEG {
		// FileDecoderOf takes a TurboDecoder as usable without nvJPEG; nvjpeg needs it.
		if e := di.DecoderAvailable(); e != nil {
			err = fmt.Errorf("%s cannot decode files: %w", dev.Name(), e)
		}
	}
	if err != nil && b == DecodeNvJPEG {
		return nil, fmt.Errorf("%w: %v", ErrNoDeviceDecoder, err)
	}
	return fd, nil
}

// cpuDecoderName names the CPU decoder of a file for the report: the JPEG backend for
// JPEGs, "go" for the other formats (Go's and golang.org/x/image's decoders).
func cpuDecoderName(dec *Decoder, data []byte) string {
	if dec.CPUJPEG != "" && stages.Sniff(data) == "jpeg" {
		return dec.CPUJPEG
	}
	return string(stages.JPEGGo)
}

// pngFast names save format=png compression=fast's encoding in the report.
const pngFast = "png-fast"

// pngFastOp is the ONE definition of save format=png compression=fast as a device op: its
// Bound and its CPU reference (stages/pngfast, docs/png-fast.md), whose bytes the device's
// encoder gives.
func pngFastOp() *sched.Op {
	return &sched.Op{Name: stageSave, Spec: "save format=png compression=fast", Encode: &sched.EncodeOp{
		Format: pngFast,
		Bound:  stages.PNGFastBound,
		CPU:    stages.EncodePNGFast,
	}}
}

// encoderName names save's encoding for the report: png-fast, png-store, png-zlibN,
// jpeg-turbo or jpeg (stages.JPEGEncoder), or the format for the others (webp or
// webp-lossless, tiff, npy).
func encoderName(opt stages.SaveOptions) string {
	switch {
	case opt.Format == "jpeg":
		return stages.JPEGEncoder()
	case opt.Format == "webp" && opt.Lossless:
		return "webp-lossless"
	case opt.Format != "png":
		return opt.Format
	case opt.Compression == stages.PNGFast:
		return pngFast
	case opt.Compression == stages.PNGNoCompression:
		return "png-store"
	}
	return fmt.Sprintf("png-zlib%d", max(opt.Compression, 1))
}

// encoderNVJPEG names save format=jpeg's encoding in the report when the device encodes it.
const encoderNVJPEG = "nvjpeg"

// jpegEncoderFor is THE rule for save format=jpeg on a GPU run: the CPU encoder (the save
// workers, as on a CPU run) when it is libjpeg-turbo; otherwise, where Go's image/jpeg would
// encode, the device's JPEG encoder (nvJPEG: same quality, 4:2:0) when the plan saves JPEG
// and dev has one that loads, for outputs of at least deviceJPEGMinPixels that a GPU run
// does not send down the CPU path; nil otherwise. The report names the encoder of each
// output. On an H200 with 16 cores, libjpeg-turbo on the save workers beat nvJPEG on every
// chain tried (1,800 photos: outputs of up to 1920×1080 in 2.7–2.9 s against 3.4–3.5 s,
// full-size 2.7 MP gray in 2.5–2.6 s against 3.1–3.4 s, RGB in 3.2–3.3 s against 3.4–3.5 s),
// and it keeps a GPU run's JPEG files the CPU run's bytes.
func jpegEncoderFor(plan *Plan, dev sched.Device) sched.JPEGEncoder {
	if plan.Save == nil || plan.Save.Options.Format != "jpeg" || cpuJPEGFast() {
		return nil
	}
	je, err := sched.JPEGEncoderOf(dev)
	if err != nil {
		return nil
	}
	return je
}

// cpuJPEGFast reports whether the CPU's JPEG encoder is libjpeg-turbo (stages.JPEGEncoder).
// A variable for the tests.
var cpuJPEGFast = func() bool { return stages.JPEGEncoder() == stages.EncoderJPEGTurbo }

// deviceJPEG is save's Encoder for a save worker whose device encoder is e: save's
// extension and quality, e's files.
func deviceJPEG(save *Encoder, e sched.ImageEncoder) *Encoder {
	q := save.Options.Quality
	return &Encoder{Ext: save.Ext, Name: encoderNVJPEG, Options: save.Options, Encode: func(w io.Writer, m *stages.Image) error {
		file, err := e.Encode(m, q)
		if err != nil {
			return err
		}
		_, err = w.Write(file)
		return err
	}}
}

// encodedBy is save's Encoder for an output the device already encoded with save's
// encoding (its DeviceOp): it writes those bytes.
func encodedBy(save *Encoder, file []byte) *Encoder {
	return &Encoder{Ext: save.Ext, Name: save.Name, Options: save.Options, Encode: func(w io.Writer, _ *stages.Image) error {
		_, err := w.Write(file)
		return err
	}}
}

// deviceJPEGMinPixels is the smallest output (width × height) that a GPU run without
// libjpeg-turbo encodes with the device's JPEG encoder; smaller ones, thumbnails, go to Go's
// encoder. A device encode has a fixed cost (an upload, the kernels, a download and a
// synchronisation: 2.5 ms for a 256×192 thumbnail with 16 save workers on an H200) and takes
// the device from the decoder, while Go's encoder takes about 30 ns per pixel: 1,800
// thumbnails of 2.7 MP photos on an H200 took 3.1 s end to end against 3.9-4.2 s with every
// one encoded on the device. A variable for the tests.
var deviceJPEGMinPixels = 1 << 18

// workerJPEG is one save worker's device JPEG encoder, made for its first output that
// the device encodes (a run whose inputs all fail or are small makes none) and closed
// when the worker ends.
type workerJPEG struct {
	b     *gpuBackend
	jpeg  sched.JPEGEncoder // its device's encoder (gpuRun.jpeg), nil for none
	tried bool
	e     sched.ImageEncoder
	enc   *Encoder
}

// encoder is the worker's deviceJPEG encoder for output m, or nil when the run saves no
// JPEG on the device, m is not an image of at least deviceJPEGMinPixels, or the encoder
// could not be made: the CPU encoder then writes m (the report says "jpeg"), and the
// run's notice says once why the encoder could not be made.
func (w *workerJPEG) encoder(m *stages.Image) *Encoder {
	if m == nil || m.W*m.H < deviceJPEGMinPixels {
		return nil
	}
	if w.tried || w.jpeg == nil {
		return w.enc
	}
	w.tried = true
	e, err := w.jpeg.NewJPEGEncoder()
	if err != nil {
		w.b.jpegMu.Lock()
		first := !w.b.jpegNotice
		w.b.jpegNotice = true
		w.b.jpegMu.Unlock()
		if first && w.b.r.opt.Notice != nil {
			w.b.r.opt.Notice(fmt.Sprintf("JPEG outputs are encoded on the CPU: %v", err))
		}
		return nil
	}
	w.e, w.enc = e, deviceJPEG(w.b.r.plan.Save.Encoder, e)
	return w.enc
}

// close releases the device encoder; its error is the run's (gpuBackend.finish).
func (w *workerJPEG) close() {
	if w.e == nil {
		return
	}
	if err := w.e.Close(); err != nil {
		w.b.jpegMu.Lock()
		w.b.jpegErr = errors.Join(w.b.jpegErr, err)
		w.b.jpegMu.Unlock()
	}
}
