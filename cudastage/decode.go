package cudastage

import (
	"errors"
	"fmt"

	"github.com/imgpipe/imgpipe/cudastage/cu"
	"github.com/imgpipe/imgpipe/cudastage/nvjpeg"
	"github.com/imgpipe/imgpipe/cudastage/sched"
)

// Decode implements sched.FileDecoder. On stream s it decodes the images
// routed sched.RouteTurbo with turbo-cuda (decodeTurbo; nvJPEG is not opened for
// them; it alone decodes at a DCT scale), those routed sched.RouteHW in batched
// calls of at most nvJPEG's capacity, and those routed sched.RouteCUDA one by one.
// An upright image (Orient 1) is decoded straight into call.Dst at its
// DstOff; the others are decoded into the stream's scratch and turned into
// place by the orientation kernel.
//
// Bad input fails only its image: a size that does not match the reserved
// shape is refused before decoding (nothing is written out of bounds), a
// failed batched call is redone one file at a time so that only the bad
// files get Err (with nvJPEG's reason), and a CUDA-decoder failure is that
// file's when nvJPEG calls the stream bad (corrupt, truncated, unsupported);
// any other failure of a single file's decode is the device's. The returned
// error is a device failure.
func (d *Device) Decode(s sched.Stream, call *sched.DecodeCall) error {
	var turbo []int
	nv := false
	for i, im := range call.Images {
		switch {
		case im.Err != nil:
		case im.Decoder == sched.RouteTurbo:
			turbo = append(turbo, i)
		case im.Scale > 1:
			call.Images[i].Err = fmt.Errorf("%s does not decode at a DCT scale (1/%d): only %s does", im.Decoder, im.Scale, sched.RouteTurbo)
		default:
			nv = true
		}
	}
	if len(turbo) > 0 {
		if err := d.decodeTurbo(s, call, turbo); err != nil {
			return err
		}
	}
	if !nv {
		return nil
	}
	c, err := d.jpeg()
	if err != nil {
		for i := range call.Images {
			if call.Images[i].Decoder != sched.RouteTurbo {
				call.Images[i].Err = err
			}
		}
		return nil
	}
	sc, err := c.forStream(s)
	if err != nil {
		return d.g.Check(err)
	}
	dst, err := sc.plan(call)
	if err != nil {
		return d.g.Check(err)
	}
	stream := cu.Stream(s)
	var hw []int
	for i := range call.Images {
		im := &call.Images[i]
		switch {
		case im.Err != nil, im.Decoder == sched.RouteTurbo:
		case im.Decoder == sched.RouteHW && sc.batch != nil:
			hw = append(hw, i)
		case im.Decoder == sched.RouteCUDA || im.Decoder == sched.RouteHW:
			// sched.RouteHW without engines cannot come from DecodeRoute; the CUDA
			// decoder takes whatever the engines take.
			single, err := sc.singleDecoder()
			if err != nil {
				return d.g.Check(err)
			}
			if err := single.Decode(im.Data, dst[i], stream); err != nil {
				if !nvjpeg.IsBadInput(err) {
					return d.g.Check(err) // not the file's fault: the device's
				}
				im.Err = imageErr(err)
			}
		default:
			im.Err = fmt.Errorf("no device decoder named %q", im.Decoder)
		}
	}
	for len(hw) > 0 {
		n := min(len(hw), c.capacity)
		if err := sc.batched(call, hw[:n], dst, stream); err != nil {
			return d.g.Check(err)
		}
		hw = hw[n:]
	}
	for i, im := range call.Images {
		if im.Err != nil || im.Orient == 1 || im.Decoder == sched.RouteTurbo {
			continue
		}
		sw, sh := im.Shape.W, im.Shape.H
		if im.Orient >= 5 {
			sw, sh = sh, sw
		}
		out := cu.DevicePtr(call.Dst) + cu.DevicePtr(im.DstOff)
		if err := d.k.Orient(stream, dst[i].Ptr, sw, sh, out, im.Orient); err != nil {
			return d.g.Check(err)
		}
	}
	return nil
}

// imageErr keeps nvJPEG's verdict on one file as that file's error.
func imageErr(err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("nvjpeg: %w", err)
}

// batched decodes images idx of call in one batched call; when the call
// fails, it decodes them one at a time so that only the bad ones fail. A
// failure that is not nvJPEG's, or a file's failure that nvJPEG does not call
// bad input, is returned: the device's, not the file's.
func (sc *streamCodec) batched(call *sched.DecodeCall, idx []int, dst []nvjpeg.Dst, s cu.Stream) error {
	files := make([][]byte, len(idx))
	out := make([]nvjpeg.Dst, len(idx))
	for k, i := range idx {
		files[k], out[k] = call.Images[i].Data, dst[i]
	}
	err := sc.batch.Decode(files, out, s)
	var ne *nvjpeg.Error
	switch {
	case err == nil:
		return nil
	case !errors.As(err, &ne):
		return err
	}
	for k, i := range idx {
		e := sc.batch.Decode(files[k:k+1], out[k:k+1], s)
		if e != nil && !nvjpeg.IsBadInput(e) {
			return e // alone, a file fails only by its own stream: anything else is the device's
		}
		call.Images[i].Err = imageErr(e)
	}
	return nil
}

// plan checks every image's stored size against its reserved shape and
// returns where nvJPEG writes each one: into call.Dst for upright images,
// into the stream's scratch for the others (grown when needed). An image
// whose size does not match gets Err.
func (sc *streamCodec) plan(call *sched.DecodeCall) ([]nvjpeg.Dst, error) {
	dst := make([]nvjpeg.Dst, len(call.Images))
	offs := make([]uint64, len(call.Images))
	var scratch uint64
	for i := range call.Images {
		im := &call.Images[i]
		if im.Err != nil || im.Decoder == sched.RouteTurbo {
			continue
		}
		sw, sh, err := sc.storedSize(im)
		if err != nil {
			im.Err = err
			continue
		}
		if im.Orient == 1 {
			dst[i] = nvjpeg.Dst{Ptr: cu.DevicePtr(call.Dst) + cu.DevicePtr(im.DstOff), Pitch: 3 * sw}
			continue
		}
		offs[i] = scratch
		scratch = alignUp(scratch+uint64(3*sw*sh), sched.Align)
		dst[i].Pitch = 3 * sw
	}
	if err := sc.growScratch(scratch); err != nil {
		return nil, err
	}
	for i, im := range call.Images {
		if im.Err == nil && im.Orient != 1 {
			dst[i].Ptr = sc.scratch + cu.DevicePtr(offs[i])
		}
	}
	return dst, nil
}

// storedSize parses im's header and returns its stored (unoriented) size,
// after checking it against im.Shape, which the executor reserved.
func (sc *streamCodec) storedSize(im *sched.DecodeImage) (w, h int, err error) {
	if im.Orient < 1 || im.Orient > 8 {
		return 0, 0, fmt.Errorf("EXIF orientation %d, want 1 to 8", im.Orient)
	}
	if im.Shape.C != 3 {
		return 0, 0, fmt.Errorf("decode gives 3 channels, the image was reserved with %d", im.Shape.C)
	}
	if err := sc.js.ParseHeader(im.Data); err != nil {
		return 0, 0, imageErr(err)
	}
	if w, h, err = sc.js.Size(); err != nil {
		return 0, 0, imageErr(err)
	}
	ow, oh := w, h
	if im.Orient >= 5 {
		ow, oh = h, w
	}
	if ow != im.Shape.W || oh != im.Shape.H {
		return 0, 0, fmt.Errorf("nvJPEG reads the size as %dx%d (oriented %dx%d), the header gave %dx%d", w, h, ow, oh, im.Shape.W, im.Shape.H)
	}
	return w, h, nil
}

// growScratch makes the stream's scratch at least n bytes. Earlier work on
// the stream may still use the old one: cuMemFree waits for it. Growth is
// rare (the largest batch of turned images sets the size).
func (sc *streamCodec) growScratch(n uint64) error {
	if n <= uint64(sc.scratchCap) {
		return nil
	}
	if sc.scratch != 0 {
		if err := cu.MemFree(sc.scratch); err != nil {
			return err
		}
		sc.scratch, sc.scratchCap = 0, 0
	}
	p, err := cu.MemAlloc(n)
	if err != nil {
		return err
	}
	sc.scratch, sc.scratchCap = p, int(n)
	return nil
}
