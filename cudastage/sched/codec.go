package sched

import (
	"errors"
	"fmt"

	"github.com/imgpipe/imgpipe/stages"
)

// Codecs on the device: a segment may start from encoded files that the
// device decodes itself (only the file's bytes cross the link), and it may end
// with an op that encodes each image into a file (only the file comes back).
//
// This file is the contract between the executor, the CUDA device (nvJPEG
// decode, the PNG encoder's kernels) and the fake device.

// The device decoders' names (routes): what FileDecoder.DecodeRoute and
// TurboDecoder.TurboRoute return, what DecodeImage.Decoder and File.Decoder
// carry, and what the report shows as an image's decoder. The CUDA device
// implements them and the fake device (schedtest) imitates them; the run's
// routing policy chooses between them by these names.
const (
	// RouteHW is nvJPEG's hardware engines, in batched calls: baseline JPEGs.
	RouteHW = "nvjpeg-hw"
	// RouteCUDA is nvJPEG's CUDA (GPU_HYBRID) decoder, one file at a time.
	RouteCUDA = "nvjpeg-cuda"
	// RouteTurbo is the device's own JPEG decoder on CUDA cores, which gives
	// libjpeg-turbo's bytes (the CPU's decoder, bit for bit) and is the only
	// one that decodes at a DCT scale.
	RouteTurbo = "turbo-cuda"
)

// DecodeImage is one image of a DecodeCall.
type DecodeImage struct {
	// Data is the whole file, in the slot's page-locked host memory.
	Data []byte
	// Shape is the decoded image after orientation, as the chain sees it;
	// C is 3 (decode gives RGB, gray files included).
	Shape Shape
	// Orient is the EXIF orientation, 1 to 8, that the device applies after
	// decoding (1: none), with the meaning stages.Orient gives it.
	Orient int
	// Scale is the DCT scale the decoder applies, as a denominator of
	// jpegturbo.ScaleDenoms (0 or 1: full size), as libjpeg-turbo scales:
	// each side is divided, rounded up. Only RouteTurbo scales; the others
	// fail a scaled image.
	Scale int
	// DstOff is the byte offset of the decoded image in DecodeCall.Dst,
	// tightly packed (row stride W·C).
	DstOff int

	// Decoder is the device decoder that takes the image, as
	// FileDecoder.DecodeRoute or TurboDecoder.TurboRoute named it (RouteHW,
	// RouteCUDA, RouteTurbo); the report shows it.
	Decoder string
	// Err is set by FileDecoder.Decode when this image could not be decoded (its
	// bytes in Dst are then undefined); the batch's other images go on.
	Err error
}

// File is an encoded file that the device decodes (ReserveFile).
type File struct {
	// Size is the file's length in bytes.
	Size int
	// Shape is the decoded image after DCT scaling and orientation, as the
	// header says; C is 3.
	Shape Shape
	// Orient and Scale are as in DecodeImage.
	Orient, Scale int
	// Decoder is the device decoder that takes the file, as
	// FileDecoder.DecodeRoute or TurboDecoder.TurboRoute named it.
	Decoder string
}

// DecodeCall decodes the encoded images of one batch into the segment's
// input buffer, before the first op runs.
type DecodeCall struct {
	Images []DecodeImage
	Dst    DevPtr
}

// FileDecoder is implemented by a Device that decodes files itself.
type FileDecoder interface {
	// DecodeRoute names the device decoder that would take the file:
	// RouteHW (the hardware engines, batched), RouteCUDA (the CUDA decoder,
	// one image at a time), or "" when none accepts it. It parses
	// the stream and asks the library; it never guesses from bytes.
	DecodeRoute(data []byte) string
	// Decode enqueues on s the decoding of every image of call into
	// call.Dst, each by the decoder its Decoder field names. An image that
	// cannot be decoded gets its Err set without failing the others (after
	// a failed batched call the device decodes the batch's images one by one
	// to find the bad ones); the returned error is a device failure, fatal
	// like any other Device error.
	Decode(s Stream, call *DecodeCall) error
}

// TurboDecoder is optionally implemented by a FileDecoder that also decodes baseline JPEGs
// with libjpeg-turbo's exact arithmetic (RouteTurbo), so that a GPU run gives the CPU run's
// bytes. Its decoder needs no warm-up.
type TurboDecoder interface {
	// TurboRoute returns RouteTurbo when that decoder takes data, else "".
	TurboRoute(data []byte) string
	// TurboBatch is the files per Decode call it decodes fastest.
	TurboBatch() int
}

// DecoderWarmer is optionally implemented by a FileDecoder whose first Decode
// on a stream pays a one-time setup (nvJPEG: its per-stream states, and the
// batched decoder's initialisation for a batch size, which takes hundreds of
// milliseconds). With Config.WarmDecoder the executor calls WarmDecoder once
// per stream when it starts, from that stream's submitting goroutine, before
// the stream's first batch. Like Decode, it returns only device failures: a
// decoder that cannot load is no error here (Decode reports it per image).
type DecoderWarmer interface {
	// WarmDecoder prepares stream s for Decode calls of up to batch images.
	WarmDecoder(s Stream, batch int) error
}

// EncodeOp makes an Op the segment's encoder: it turns each image into a
// file of at most Bound(in) bytes, and the device writes each image's length.
// It must be the segment's last op.
type EncodeOp struct {
	// Format names the encoding, for traces and the report ("png-fast").
	Format string
	// Bound is the largest file the op can produce from an image of shape in.
	Bound func(in Shape) int
	// CPU is the reference: it writes the file for src into dst (Bound long)
	// and returns its length, or -1 when the file does not fit (a Bound too
	// small: a bug the executor reports as the image's error). A device must
	// give the same bytes.
	CPU func(dst []byte, src *stages.Image) int
}

// DecoderInfo is optionally implemented by a FileDecoder whose library is loaded at run
// time (the CUDA device's nvJPEG): it says whether decoding works on this machine.
type DecoderInfo interface {
	// DecoderAvailable returns nil when Decode works, or why it does not (nvJPEG
	// missing, say): a device that implements FileDecoder without it is taken as
	// available.
	DecoderAvailable() error
	// DecoderEngines is the number of hardware decode engines (7 on an H200), or 0
	// when the device reports none.
	DecoderEngines() int
	// DecoderBatch is the number of files per decode call that keeps the
	// hardware engines busy (a GPU run's default batch when the device decodes
	// its files), or 0 without engines.
	DecoderBatch() int
}

// FileDecoderOf returns dev's file decoder, or why it has none usable: dev does not
// implement FileDecoder, or its DecoderAvailable says why not. A TurboDecoder is always
// usable: its own decoder needs no library, and it loads the other (nvJPEG) only when a
// file needs it, which spares a run of baseline JPEGs the loading
// (bench/results/2026-12-07-code-comments.md#cudastagesched).
func FileDecoderOf(dev Device) (FileDecoder, error) {
	fd, ok := dev.(FileDecoder)
	if !ok {
		return nil, fmt.Errorf("%s decodes no files", dev.Name())
	}
	if _, turbo := dev.(TurboDecoder); turbo {
		return fd, nil
	}
	if di, ok := dev.(DecoderInfo); ok {
		if err := di.DecoderAvailable(); err != nil {
			return nil, fmt.Errorf("%s cannot decode files: %w", dev.Name(), err)
		}
	}
	return fd, nil
}

// JPEGEncoder is implemented by a Device that encodes JPEG files itself (the
// CUDA device's nvJPEG): a GPU run's save format=jpeg encodes there, one
// image at a time per save worker, from the result's host memory.
type JPEGEncoder interface {
	// JPEGEncoderAvailable returns nil when NewJPEGEncoder works on this
	// machine, or why it does not (nvJPEG missing, say).
	JPEGEncoderAvailable() error
	// NewJPEGEncoder returns an encoder for one goroutine at a time (a save
	// worker). Close it when the worker is done.
	NewJPEGEncoder() (ImageEncoder, error)
}

// ImageEncoder turns images into files on the device, one at a time.
type ImageEncoder interface {
	// Encode returns the JPEG file of m at quality 1..100: baseline, chroma
	// 4:2:0 for C = 3 (as stages' CPU encoder, Go's image/jpeg, writes it),
	// gray for C = 1. Its error fails only this image.
	Encode(m *stages.Image, quality int) ([]byte, error)
	// Close releases the encoder's device resources.
	Close() error
}

// JPEGEncoderOf returns dev's JPEG encoder, or why it has none usable: dev does not
// implement JPEGEncoder, or its JPEGEncoderAvailable says why not.
func JPEGEncoderOf(dev Device) (JPEGEncoder, error) {
	je, ok := dev.(JPEGEncoder)
	if !ok {
		return nil, fmt.Errorf("%s encodes no JPEG files", dev.Name())
	}
	if err := je.JPEGEncoderAvailable(); err != nil {
		return nil, fmt.Errorf("%s cannot encode JPEG files: %w", dev.Name(), err)
	}
	return je, nil
}

// check reports whether the encode op is complete.
func (c *EncodeOp) check() error {
	switch {
	case c.Format == "":
		return errors.New("encode op without a format")
	case c.Bound == nil || c.CPU == nil:
		return fmt.Errorf("encode op %s without a Bound or CPU function", c.Format)
	}
	return nil
}
