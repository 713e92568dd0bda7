package pipeline

import (
	"errors"
	"fmt"

	"github.com/imgpipe/imgpipe/cudastage/sched"
	"github.com/imgpipe/imgpipe/stages"
	"github.com/imgpipe/imgpipe/stages/jpegturbo"
)

// Where files decode and encode on a GPU run: the decode stage's backends, the routing
// rule, and the device encoding op of save format=png compression=fast.

// The decode stage's backends.
const (
	// backendAuto: on a GPU run, JPEGs the hardware engines take decode there, the rest
	// on the CPU; on the CPU, libjpeg-turbo when it loads, else Go's decoder.
	backendAuto = "auto"
	// backendNvJPEG: every JPEG the device decoder takes decodes there (other formats on
	// the CPU); a run without nvJPEG fails at validation.
	backendNvJPEG = "nvjpeg"
)

// decodeBackends are the decode stage's backend values.
var decodeBackends = []string{backendAuto, string(stages.JPEGGo), string(stages.JPEGTurbo), backendNvJPEG}

// ErrNoDeviceDecoder is wrapped by the validation error of decode backend=nvjpeg on a run
// that has no usable device decoder. The CLI exits 2 when the run is on the CPU (a usage
// error) and 3 on a GPU that cannot load nvJPEG (a runtime one).
var ErrNoDeviceDecoder = errors.New("decode backend=nvjpeg needs a GPU with nvJPEG")

// cpuJPEG is the JPEG decoder of the CPU path, and of the files a GPU run decodes on CPU
// workers, for a backend: auto and nvjpeg use libjpeg-turbo when it loads, else Go's.
func cpuJPEG(backend string) stages.JPEGBackend {
	switch backend {
	case backendAuto, backendNvJPEG:
		if jpegturbo.Available() == nil {
			return stages.JPEGTurbo
		}
		return stages.JPEGGo
	}
	return stages.JPEGBackend(backend)
}

// deviceDecoder is THE routing rule of a GPU run: given the decode backend and the
// device decoder that would take a JPEG (FileDecoder.DecodeRoute: "nvjpeg-hw",
// "nvjpeg-cuda" or ""), it names the device decoder that decodes it, or "" for the CPU
// decoders (cpuJPEG). auto sends only what the hardware engines take (their batched
// decode was measured at 2,800 img/s on an H200; the CUDA decoder is slower than
// libjpeg-turbo on CPU workers for progressive files — set by measurement on the GPU
// host); nvjpeg sends every file the device accepts; go and turbo never use it.
func deviceDecoder(backend, route string) string {
	switch backend {
	case backendAuto:
		if route == "nvjpeg-hw" {
			return route
		}
	case backendNvJPEG:
		return route
	}
	return ""
}

// fileDecoderFor returns the device decoder a GPU run on dev uses for plan's decode
// stage: nil when the backend never uses one, or auto finds none; an error wrapping
// ErrNoDeviceDecoder when backend=nvjpeg finds none (dev is nil on a CPU run).
func fileDecoderFor(plan *Plan, dev sched.Device) (sched.FileDecoder, error) {
	b := plan.Decode.Backend
	if b != backendAuto && b != backendNvJPEG {
		return nil, nil
	}
	if dev == nil {
		if b == backendNvJPEG {
			return nil, fmt.Errorf("%w: this run is on the CPU (use backend=auto, go or turbo there)", ErrNoDeviceDecoder)
		}
		return nil, nil
	}
	fd, err := sched.FileDecoderOf(dev)
	if err != nil && b == backendNvJPEG {
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
// Bound and its CPU reference, whose bytes the device's encoder gives. The reference is
// stages.Encode's Huffman-only PNG today (the encoder specified in DESIGN.md replaces it
// at merge: stages/pngfast's Bound and Encode).
func pngFastOp() *sched.Op {
	opt := stages.SaveOptions{Format: "png", Compression: stages.PNGHuffmanOnly}
	return &sched.Op{Name: stageSave, Spec: "save format=png compression=fast", Encode: &sched.EncodeOp{
		Format: pngFast,
		// Go's Huffman-only deflate stores a block whenever Huffman coding would not
		// shrink it by a sixteenth, so the zlib stream stays within the filtered rows
		// plus 5 bytes per 64 KiB block; an eighth more covers that, the 12-byte header
		// of each 64 KiB IDAT chunk and the zlib framing, and 1 KiB the PNG's other
		// chunks. TestPNGFastBound checks it on incompressible images.
		Bound: func(in stages.Shape) int { return in.H*(in.W*in.C+1)*9/8 + 1024 },
		CPU: func(dst []byte, src *stages.Image) int {
			w := &boundedWriter{b: dst[:0]}
			if stages.Encode(w, src, opt) != nil {
				return -1
			}
			return len(w.b)
		}}}
}

// boundedWriter appends into its slice's capacity and fails past it.
type boundedWriter struct{ b []byte }

func (w *boundedWriter) Write(p []byte) (int, error) {
	if len(w.b)+len(p) > cap(w.b) {
		return 0, fmt.Errorf("encoded file over its bound of %d bytes", cap(w.b))
	}
	w.b = append(w.b, p...)
	return len(p), nil
}

// encoderName names save's encoding for the report: png-fast, png-store, png-zlibN, jpeg.
func encoderName(opt stages.SaveOptions) string {
	switch {
	case opt.Format == "jpeg":
		return "jpeg"
	case opt.Compression == stages.PNGHuffmanOnly:
		return pngFast
	case opt.Compression == stages.PNGNoCompression:
		return "png-store"
	}
	return fmt.Sprintf("png-zlib%d", max(opt.Compression, 1))
}
