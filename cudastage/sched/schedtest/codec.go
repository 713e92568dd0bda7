package schedtest

import (
	"errors"
	"fmt"
	"time"

	"github.com/imgpipe/imgpipe/cudastage/sched"
	"github.com/imgpipe/imgpipe/stages"
)

// Turbo is a FakeDevice that also has a decoder of its own, as the CUDA device has
// turbo-cuda (sched.TurboDecoder): it takes the baseline JPEGs of 1 or 3 components, and
// decodes them with libjpeg-turbo, at the DecodeImage's DCT scale.
type Turbo struct{ *FakeDevice }

var _ sched.TurboDecoder = Turbo{}

// TurboRoute implements sched.TurboDecoder.
func (Turbo) TurboRoute(data []byte) string {
	if sequentialRGB(data) && !stages.JPEGProgressive(data) {
		return sched.RouteTurbo
	}
	return ""
}

// TurboBatch implements sched.TurboDecoder.
func (Turbo) TurboBatch() int { return 8 }

// DecodeRoute implements sched.FileDecoder from the JPEG's frame header, as
// nvJPEG's hardware backend decides: a baseline or extended sequential frame of 1
// or 3 components goes to sched.RouteHW, a progressive one to sched.RouteCUDA,
// anything else (other formats, lossless or arithmetic-coded JPEG, CMYK) to neither.
func (f *FakeDevice) DecodeRoute(data []byte) string {
	f.mu.Lock()
	f.routes++
	f.mu.Unlock()
	switch {
	case !sequentialRGB(data):
		return ""
	case stages.JPEGProgressive(data):
		return sched.RouteCUDA
	}
	return sched.RouteHW
}

// RouteCalls is how many times DecodeRoute ran: on a CUDA device the first call
// opens nvJPEG.
func (f *FakeDevice) RouteCalls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.routes
}

// sequentialRGB reports whether data is a Huffman-coded sequential or progressive JPEG
// (SOF0-2) of 1 or 3 components.
func sequentialRGB(data []byte) bool {
	if len(data) < 2 || data[0] != 0xFF || data[1] != 0xD8 || stages.JPEGCoding(data) != "" {
		return false
	}
	n := stages.JPEGComponents(data)
	return n == 1 || n == 3
}

// DecoderAvailable implements sched.DecoderInfo: FakeConfig.DecoderUnavailable.
func (f *FakeDevice) DecoderAvailable() error { return f.cfg.DecoderUnavailable }

// DecoderEngines implements sched.DecoderInfo: FakeConfig.DecoderEngines.
func (f *FakeDevice) DecoderEngines() int { return f.cfg.DecoderEngines }

// DecoderBatch implements sched.DecoderInfo: 8 files per engine, as nvJPEG's
// batched calls on a GPU with one core per engine.
func (f *FakeDevice) DecoderBatch() int { return 8 * f.cfg.DecoderEngines }

// PeakDecodes is the most Decode calls that were in progress at once (see
// FakeConfig.DecodeBlock).
func (f *FakeDevice) PeakDecodes() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.peakDecodes
}

// WarmDecoder implements sched.DecoderWarmer: it checks the stream and the
// batch size, asks FakeConfig.Fault ("WarmDecoder") and counts the call. A
// decoder that cannot load (DecoderUnavailable) warms nothing.
func (f *FakeDevice) WarmDecoder(s sched.Stream, batch int) error {
	if f.DecoderAvailable() != nil {
		return nil
	}
	if err := f.syncCall("WarmDecoder"); err != nil {
		return err
	}
	f.mu.Lock()
	st, ok := f.streams[s]
	open := ok && !st.closed
	f.mu.Unlock()
	switch {
	case !open:
		return &FakeError{Call: "WarmDecoder", Err: fmt.Errorf("invalid stream %#x", s)}
	case batch < 1:
		return &FakeError{Call: "WarmDecoder", Err: fmt.Errorf("batch of %d images", batch)}
	}
	f.count("WarmDecoder")
	return nil
}

// Decode implements sched.FileDecoder with stages.Decode (the CPU path's default decoders) and
// stages.Orient, on the stream: the files are read from page-locked memory and
// written into call.Dst, checked like any device access. An image that does
// not decode (or that FakeConfig.DecodeFail fails) gets its Err set; with
// BatchFailsWhole the batch's hardware images are decoded again one by one
// after such a failure ("Decode batch failed", "Decode single" in Calls).
func (f *FakeDevice) Decode(s sched.Stream, call *sched.DecodeCall) error {
	if err := f.DecoderAvailable(); err != nil {
		return &FakeError{Call: "Decode", Err: err}
	}
	f.mu.Lock()
	err := f.checkDecode(call)
	f.decoding++
	f.peakDecodes = max(f.peakDecodes, f.decoding)
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		f.decoding--
		f.mu.Unlock()
	}()
	if err != nil {
		return &FakeError{Call: "Decode", Err: err}
	}
	if f.cfg.DecodeBlock != nil {
		f.cfg.DecodeBlock()
	}
	imgs, dst := call.Images, call.Dst // the executor keeps call until the batch completed
	return f.enqueue(s, "Decode", func() error {
		f.compute.Lock() // the decoders share the device with the kernels
		defer f.compute.Unlock()
		if f.cfg.KernelLatency > 0 {
			time.Sleep(f.cfg.KernelLatency)
		}
		views := make([][]byte, len(imgs))
		f.mu.Lock()
		for i, im := range imgs {
			b, err := f.devRange(dst, im.DstOff, im.Shape.Bytes())
			if err != nil {
				f.mu.Unlock()
				return fmt.Errorf("image %d: %w", i, err)
			}
			views[i] = b
		}
		f.mu.Unlock()
		var hw []int
		for i := range imgs {
			if imgs[i].Decoder == sched.RouteHW {
				hw = append(hw, i)
				continue
			}
			imgs[i].Err = f.decodeOne(&imgs[i], views[i])
			f.count("Decode single")
		}
		if len(hw) == 0 {
			return nil
		}
		f.count("Decode batch")
		failed := false
		for _, i := range hw {
			imgs[i].Err = f.decodeOne(&imgs[i], views[i])
			failed = failed || imgs[i].Err != nil
		}
		if failed && f.cfg.BatchFailsWhole {
			f.count("Decode batch failed")
			for _, i := range hw {
				imgs[i].Err = f.decodeOne(&imgs[i], views[i])
				f.count("Decode single")
			}
		}
		return nil
	})
}

func (f *FakeDevice) count(call string) {
	f.mu.Lock()
	f.calls[call]++
	f.mu.Unlock()
}

// checkDecode checks a decode call as a launch would be: each file in
// page-locked memory, each image inside call.Dst, a known decoder. f.mu held.
func (f *FakeDevice) checkDecode(call *sched.DecodeCall) error {
	for i, im := range call.Images {
		switch {
		case !f.pinned(im.Data) || len(im.Data) == 0:
			return fmt.Errorf("image %d: the file is not in page-locked (HostAlloc) memory", i)
		case im.Decoder != sched.RouteHW && im.Decoder != sched.RouteCUDA && im.Decoder != sched.RouteTurbo:
			return fmt.Errorf("image %d: unknown decoder %q", i, im.Decoder)
		case im.Shape.C != 3 || im.Orient < 1 || im.Orient > 8:
			return fmt.Errorf("image %d: shape %v, orientation %d", i, im.Shape, im.Orient)
		}
		if _, err := f.devRange(call.Dst, im.DstOff, im.Shape.Bytes()); err != nil {
			return fmt.Errorf("image %d: %w", i, err)
		}
	}
	return nil
}

// decodeOne decodes one file into dst (the oriented image, tightly packed),
// as the CPU path's default decoder does (sched.RouteTurbo: libjpeg-turbo, at the
// image's scale, which only sched.RouteTurbo takes).
func (f *FakeDevice) decodeOne(im *sched.DecodeImage, dst []byte) error {
	if f.cfg.DecodeFail != nil {
		if err := f.cfg.DecodeFail(im.Data); err != nil {
			return err
		}
	}
	scale := max(1, im.Scale)
	if scale > 1 && im.Decoder != sched.RouteTurbo {
		return fmt.Errorf("%s does not decode at a DCT scale (1/%d)", im.Decoder, scale)
	}
	out := &stages.Image{W: im.Shape.W, H: im.Shape.H, C: 3, Stride: im.Shape.W * 3, Pix: dst}
	stored := im.Shape
	if im.Orient >= 5 {
		stored.W, stored.H = stored.H, stored.W
	}
	alloc := func(w, h, c int) (*stages.Image, error) {
		if w != stored.W || h != stored.H || c != 3 {
			return nil, fmt.Errorf("the file decodes to %dx%dx%d, not the %v its header gave", w, h, c, stored)
		}
		if im.Orient == 1 {
			return out, nil
		}
		return stages.NewImage(w, h, c), nil
	}
	// The CPU path's default decoder (libjpeg-turbo where it loads), so that a test's
	// device run and CPU run start from the same pixels, as the exactness contract
	// (everything after decode bit-exact) needs.
	backend, _ := stages.ResolveJPEGBackend(stages.JPEGAuto)
	opt := stages.DecodeOptions{JPEG: backend}
	if im.Decoder == sched.RouteTurbo {
		opt.JPEG, opt.Scale = stages.JPEGTurbo, func(int, int) int { return scale }
	}
	opt.MaxPixels = int64(stored.W) * int64(stored.H) * int64(scale*scale)
	m, err := stages.Decode(im.Data, opt, alloc)
	if err != nil {
		return err
	}
	if im.Orient == 1 {
		if m != out {
			return errors.New("decoder wrote into a buffer of its own")
		}
		return nil
	}
	return stages.Orient(out, m, im.Orient)
}

// errNoJPEGEncoder is JPEGEncoderAvailable's answer without FakeConfig.JPEGEncode.
var errNoJPEGEncoder = errors.New("the fake device has no JPEG encoder (FakeConfig.JPEGEncode is nil)")

// JPEGEncoderAvailable implements sched.JPEGEncoder: nil when FakeConfig.JPEGEncode is set.
func (f *FakeDevice) JPEGEncoderAvailable() error {
	if f.cfg.JPEGEncode == nil {
		return errNoJPEGEncoder
	}
	return nil
}

// NewJPEGEncoder implements sched.JPEGEncoder with FakeConfig.JPEGEncode. It counts
// "JPEG encoder new" in Calls, and each encoder's Close "JPEG encoder close", so that
// tests can check every encoder is closed.
func (f *FakeDevice) NewJPEGEncoder() (sched.ImageEncoder, error) {
	if err := f.JPEGEncoderAvailable(); err != nil {
		return nil, &FakeError{Call: "NewJPEGEncoder", Err: err}
	}
	if err := f.syncCall("NewJPEGEncoder"); err != nil {
		return nil, err
	}
	f.count("JPEG encoder new")
	return &fakeJPEGEncoder{f: f}, nil
}

// fakeJPEGEncoder is one save worker's encoder on a FakeDevice.
type fakeJPEGEncoder struct {
	f      *FakeDevice
	closed bool
}

// Encode implements sched.ImageEncoder: the device's sticky error and the fault hook
// ("JPEGEncode"), then FakeConfig.JPEGEncode. It counts "JPEG encode" in Calls.
func (e *fakeJPEGEncoder) Encode(m *stages.Image, quality int) ([]byte, error) {
	if e.closed {
		return nil, &FakeError{Call: "JPEGEncode", Err: errors.New("encode after Close")}
	}
	if err := e.f.syncCall("JPEGEncode"); err != nil {
		return nil, err
	}
	e.f.count("JPEG encode")
	return e.f.cfg.JPEGEncode(m, quality)
}

// Close implements sched.ImageEncoder; a second Close is an error, as a double free is.
func (e *fakeJPEGEncoder) Close() error {
	if e.closed {
		return &FakeError{Call: "JPEGEncoderClose", Err: errors.New("closed twice")}
	}
	e.closed = true
	e.f.count("JPEG encoder close")
	return nil
}
