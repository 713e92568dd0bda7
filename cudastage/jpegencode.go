package cudastage

import (
	"fmt"

	"github.com/imgpipe/imgpipe/cudastage/nvjpeg"
	"github.com/imgpipe/imgpipe/cudastage/sched"
	"github.com/imgpipe/imgpipe/stages"
)

// The device's JPEG encoder: save format=jpeg on a GPU run encodes with
// nvJPEG, one encoder (stream, state, page-locked buffer) per save worker.

var _ sched.JPEGEncoder = (*Device)(nil)

// jpegSubsampling is the chroma subsampling of the device's colour JPEGs:
// 4:2:0, what stages' CPU encoders (libjpeg-turbo, or Go's image/jpeg) write, so
// that a file's layout does not depend on the device; only the encoders' rounding differs
// (TestGPUJPEGEncodePSNR bounds it).
const jpegSubsampling = nvjpeg.Sub420

// JPEGEncoderAvailable implements sched.JPEGEncoder: why nvJPEG cannot encode
// on this device (the GPU failed, the library is missing), or nil.
func (d *Device) JPEGEncoderAvailable() error {
	if err := d.g.Err(); err != nil {
		return err
	}
	if err := nvjpeg.Load(); err != nil {
		return fmt.Errorf("nvJPEG cannot be used: %w", err)
	}
	return nil
}

// NewJPEGEncoder implements sched.JPEGEncoder with an nvjpeg.Encoder writing
// jpegSubsampling.
func (d *Device) NewJPEGEncoder() (sched.ImageEncoder, error) {
	e, err := nvjpeg.NewEncoder(d.g, jpegSubsampling)
	if err != nil {
		return nil, d.g.Check(err)
	}
	return &jpegEncoder{e: e, g: d.g}, nil
}

// jpegEncoder adapts an nvjpeg.Encoder to sched.ImageEncoder; its errors go
// through GPU.Check, so a sticky fault marks the GPU failed.
type jpegEncoder struct {
	e *nvjpeg.Encoder
	g *GPU
}

// Encode implements sched.ImageEncoder.
func (j *jpegEncoder) Encode(m *stages.Image, quality int) ([]byte, error) {
	b, err := j.e.Encode(m.Pix, m.W, m.H, m.C, m.Stride, quality)
	return b, j.g.Check(err)
}

// Close implements sched.ImageEncoder.
func (j *jpegEncoder) Close() error { return j.g.Check(j.e.Close()) }
