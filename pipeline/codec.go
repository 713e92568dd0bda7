package pipeline

import (
	"fmt"

	"github.com/imgpipe/imgpipe/cudastage/sched"
	"github.com/imgpipe/imgpipe/stages"
	"github.com/imgpipe/imgpipe/stages/jpegturbo"
)

// The codecs' words: the decode stage's backends and scales, and the encoders' names in
// the report, with the device encoding op of save format=png compression=fast. Where files
// decode and encode on a GPU run is package pipeline/gpu's.

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
		names = append(names, ScaleName(d))
	}
	return append(names, scaleAuto)
}

// ScaleName writes a scale denominator as the decode stage's value and the report's
// decode_scale do: "1/4"; "1" for full size.
func ScaleName(denom int) string {
	if denom <= 1 {
		return "1"
	}
	return fmt.Sprintf("1/%d", denom)
}

// scaleDenom reads a scale value back: 4 for "1/4", 1 for "1" and for auto (which
// bindDecodeScale resolves per image).
func scaleDenom(name string) int {
	for _, d := range jpegturbo.ScaleDenoms {
		if ScaleName(d) == name {
			return d
		}
	}
	return 1
}

// CPU is the JPEG decoder of the CPU path, and of the files a GPU run decodes on CPU
// workers, for backend b: nvjpeg's CPU side is auto's, which stages.ResolveJPEGBackend
// resolves (libjpeg-turbo when it loads, else Go's).
func (b DecodeBackend) CPU() stages.JPEGBackend {
	if b == DecodeNvJPEG {
		return stages.JPEGAuto
	}
	return stages.JPEGBackend(b)
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
