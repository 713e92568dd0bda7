package schedtest

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/imgpipe/imgpipe/cudastage/sched"
	"github.com/imgpipe/imgpipe/stages"
)

// fakeTableEntry is the fake's launch table entry: four little-endian
// uint64s per image.
const fakeTableEntry = 32

// TableBytes implements sched.Device.
func (f *FakeDevice) TableBytes(op sched.Op, n int) int { return fakeTableEntry * n }

// CheckOp implements Device: the fake runs any op with its CPU function (an
// encoding op with its EncodeOp's, a reduction with its Reduce), so it
// refuses a GPU-only op, which has none.
func (f *FakeDevice) CheckOp(op sched.Op) error {
	if op.CPU == nil && op.Encode == nil && op.Reduce == nil {
		return fmt.Errorf("op %s has no CPU function for the fake device to run", op)
	}
	return nil
}

// ScratchBytes implements Device: every op that makes an image asks for a
// uint16 per sample, as the CUDA separable filters do, so that the
// executor's scratch plumbing is exercised.
func (f *FakeDevice) ScratchBytes(op sched.Op, srcCap, n int) int {
	if writesImage(op) {
		return 2 * srcCap
	}
	return 0
}

// EncodeTable implements sched.Device.
func (f *FakeDevice) EncodeTable(call *sched.OpCall, dst []byte) error {
	if len(dst) < fakeTableEntry*len(call.Images) {
		return &FakeError{Call: "EncodeTable", Err: fmt.Errorf("table of %d bytes for %d images", len(dst), len(call.Images))}
	}
	for i, im := range call.Images {
		b := dst[i*fakeTableEntry:]
		out := uint64(im.DstOff)
		switch {
		case call.Op.Hist:
			out = uint64(im.HistOff)
		case call.Op.Reduce != nil:
			out = uint64(im.ValueOff)
		}
		binary.LittleEndian.PutUint64(b[0:], uint64(im.SrcOff))
		binary.LittleEndian.PutUint64(b[8:], out)
		binary.LittleEndian.PutUint64(b[16:], uint64(im.In.W)<<32|uint64(im.In.H))
		binary.LittleEndian.PutUint64(b[24:], uint64(im.In.C))
	}
	return nil
}

// Run implements sched.Device. The launch reads each image's offsets and shape
// from the uploaded table, like a real kernel; call.Images gives only the
// image count.
func (f *FakeDevice) Run(s sched.Stream, call *sched.OpCall) error {
	c := *call // the caller may reuse call once Run returns
	n := len(call.Images)
	name := "Run " + c.Op.Name
	if err := c.Op.Check(); err != nil {
		return &FakeError{Call: name, Err: err}
	}
	f.mu.Lock()
	_, terr := f.devRange(c.Table, c.TableOff, fakeTableEntry*n)
	f.mu.Unlock()
	if terr != nil {
		return &FakeError{Call: name, Err: fmt.Errorf("launch table: %w", terr)}
	}
	return f.enqueue(s, name, func() error {
		f.compute.Lock()
		defer f.compute.Unlock()
		if f.cfg.KernelLatency > 0 {
			time.Sleep(f.cfg.KernelLatency)
		}
		jobs, err := f.resolve(&c, n)
		if err != nil {
			return err
		}
		// The views stay valid without f.mu: freeing a buffer that a queued
		// launch uses would be the caller's bug, and the race detector's.
		for _, j := range jobs {
			j()
		}
		return nil
	})
}

// resolve reads the launch table and returns one closure per image doing the
// op on views into device memory, or an illegal-address error.
func (f *FakeDevice) resolve(c *sched.OpCall, n int) ([]func(), error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if writesImage(c.Op) {
		if _, err := f.devRange(c.Scratch, 0, 1); err != nil {
			return nil, fmt.Errorf("%s scratch: %w", c.Op, err)
		}
	}
	tab, err := f.devRange(c.Table, c.TableOff, fakeTableEntry*n)
	if err != nil {
		return nil, err
	}
	jobs := make([]func(), 0, n)
	for i := range n {
		b := tab[i*fakeTableEntry:]
		srcOff := int(binary.LittleEndian.Uint64(b[0:]))
		outOff := int(binary.LittleEndian.Uint64(b[8:]))
		wh := binary.LittleEndian.Uint64(b[16:])
		in := sched.Shape{W: int(wh >> 32), H: int(uint32(wh)), C: int(binary.LittleEndian.Uint64(b[24:]))}
		check := sched.CheckShape
		if c.Op.Array {
			check = sched.CheckArrayShape
		}
		if err := check(in); err != nil {
			return nil, fmt.Errorf("image %d: %w", i, err)
		}
		j, err := f.imageJob(c, i, in, srcOff, outOff)
		if err != nil {
			return nil, fmt.Errorf("image %d: %w", i, err)
		}
		jobs = append(jobs, j)
	}
	return jobs, nil
}

// imageJob returns the op on image i with its CPU function. f.mu held.
func (f *FakeDevice) imageJob(c *sched.OpCall, i int, in sched.Shape, srcOff, outOff int) (func(), error) {
	sp, err := f.devRange(c.Src, srcOff, in.Bytes())
	if err != nil {
		return nil, err
	}
	src := &stages.Image{W: in.W, H: in.H, C: in.C, Stride: in.W * in.C, Pix: sp}
	op := c.Op
	if op.Hist {
		hp, err := f.devRange(c.Hist, outOff, sched.HistBytes)
		if err != nil {
			return nil, err
		}
		return func() {
			var h [256]uint64
			op.CPU(nil, src, &h)
			for k, v := range h {
				binary.LittleEndian.PutUint64(hp[8*k:], v)
			}
		}, nil
	}
	if op.Reduce != nil {
		vp, err := f.devRange(c.Values, outOff, sched.ElemBytes)
		if err != nil {
			return nil, fmt.Errorf("values: %w", err)
		}
		return func() { binary.LittleEndian.PutUint32(vp, math.Float32bits(op.Reduce(src))) }, nil
	}
	if op.Encode != nil {
		return f.encodeJob(c, i, src, outOff)
	}
	out := op.OutShape(in)
	dp, err := f.devRange(c.Dst, outOff, out.Bytes())
	if err != nil {
		return nil, err
	}
	if c.Src == c.Dst && srcOff < outOff+out.Bytes() && outOff < srcOff+in.Bytes() {
		return nil, errors.New("source and destination overlap")
	}
	dst := &stages.Image{W: out.W, H: out.H, C: out.C, Stride: out.W * out.C, Pix: dp}
	return func() { op.CPU(dst, src, nil) }, nil
}

// encodeJob returns an encoding op on image i with its reference encoder: the
// file goes into its Bound bytes of c.Dst at outOff, its length (0xFFFFFFFF
// when the encoder refused) into c.Lens. f.mu held.
func (f *FakeDevice) encodeJob(c *sched.OpCall, i int, src *stages.Image, outOff int) (func(), error) {
	enc := c.Op.Encode
	bound := enc.Bound(src.Shape())
	dp, err := f.devRange(c.Dst, outOff, bound)
	if err != nil {
		return nil, err
	}
	lp, err := f.devRange(c.Lens, 4*i, 4)
	if err != nil {
		return nil, fmt.Errorf("lengths: %w", err)
	}
	if c.Src == c.Dst {
		return nil, errors.New("an encoder reads and writes one buffer")
	}
	return func() {
		n := enc.CPU(dp, src)
		binary.LittleEndian.PutUint32(lp, uint32(n)) // -1 becomes 0xFFFFFFFF, over any bound
	}, nil
}

// writesImage reports whether op writes an image or array into c.Dst (every
// op but a histogram or a reduction), and so gets scratch.
func writesImage(op sched.Op) bool { return !op.Hist && op.Reduce == nil }
