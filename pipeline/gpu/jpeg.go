package gpu

import (
	"errors"
	"fmt"
	"io"

	"github.com/imgpipe/imgpipe/cudastage/sched"
	"github.com/imgpipe/imgpipe/pipeline"
	"github.com/imgpipe/imgpipe/stages"
)

// How a GPU run encodes its outputs: save format=jpeg on the device's JPEG encoder where
// it pays (jpegEncoderFor), and files the device already encoded (encodedBy).

// encoderNVJPEG names save format=jpeg's encoding in the report when the device encodes it.
const encoderNVJPEG = "nvjpeg"

// jpegEncoderFor is THE rule for save format=jpeg on a GPU run: the CPU encoder (the save
// workers, as on a CPU run) when it is libjpeg-turbo; otherwise, where Go's image/jpeg would
// encode, the device's JPEG encoder (nvJPEG: same quality, 4:2:0) when the plan saves JPEG
// and dev has one that loads, for outputs of at least deviceJPEGMinPixels that a GPU run
// does not send down the CPU path; nil otherwise. The report names the encoder of each
// output. libjpeg-turbo on the save workers beat nvJPEG on every chain tried (figures in
// bench/results/2026-12-07-code-comments.md), and it keeps a GPU run's JPEG files the CPU
// run's bytes.
func jpegEncoderFor(plan *pipeline.Plan, dev sched.Device) sched.JPEGEncoder {
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
func deviceJPEG(save *pipeline.Encoder, e sched.ImageEncoder) *pipeline.Encoder {
	q := save.Options.Quality
	return &pipeline.Encoder{Ext: save.Ext, Name: encoderNVJPEG, Options: save.Options, Encode: func(w io.Writer, m *stages.Image) error {
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
func encodedBy(save *pipeline.Encoder, file []byte) *pipeline.Encoder {
	return &pipeline.Encoder{Ext: save.Ext, Name: save.Name, Options: save.Options, Encode: func(w io.Writer, _ *stages.Image) error {
		_, err := w.Write(file)
		return err
	}}
}

// deviceJPEGMinPixels is the smallest output (width × height) that a GPU run without
// libjpeg-turbo encodes with the device's JPEG encoder; smaller ones, thumbnails, go to Go's
// encoder. A device encode has a fixed cost (an upload, the kernels, a download and a
// synchronisation) and takes the device from the decoder, while Go's encoder's cost grows
// with the pixels, so a small output is encoded sooner on the CPU (figures in
// bench/results/2026-12-07-code-comments.md). A variable for the tests.
var deviceJPEGMinPixels = 1 << 18

// workerJPEG is one save worker's device JPEG encoder, made for its first output that
// the device encodes (a run whose inputs all fail or are small makes none) and closed
// when the worker ends.
type workerJPEG struct {
	b     *gpuBackend
	jpeg  sched.JPEGEncoder // its device's encoder (gpuRun.jpeg), nil for none
	tried bool
	e     sched.ImageEncoder
	enc   *pipeline.Encoder
}

// encoder is the worker's deviceJPEG encoder for output m, or nil when the run saves no
// JPEG on the device, m is not an image of at least deviceJPEGMinPixels, or the encoder
// could not be made: the CPU encoder then writes m (the report says "jpeg"), and the
// run's notice says once why the encoder could not be made.
func (w *workerJPEG) encoder(m *stages.Image) *pipeline.Encoder {
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
		if first && w.b.r.Options().Notice != nil {
			w.b.r.Options().Notice(fmt.Sprintf("JPEG outputs are encoded on the CPU: %v", err))
		}
		return nil
	}
	w.e, w.enc = e, deviceJPEG(w.b.r.Plan().Save.Encoder, e)
	return w.enc
}

// close releases the device encoder; its error is the run's (gpuBackend.Finish).
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
