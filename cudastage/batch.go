package cudastage

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"

	"github.com/imgpipe/imgpipe/cudastage/cu"
	"github.com/imgpipe/imgpipe/cudastage/sched"
)

// Batched kernel launches.
//
// One Batch is one sched.Op over a batch of images: a single kernel launch
// (two for the separable filters) covers every image, whatever their sizes,
// through a launch table in device memory with one entry per image. Which
// kernels run, and how images map onto their blocks, is the op's launcher
// (launcher.go; one op_<stage>.go file per stage). The host code here plans
// everything (placements, scratch, launch tables, grid sizes) in plain Go, so
// it is tested without a GPU; Kernels.Run only queues the memset (histogram)
// and launches on the caller's stream, asynchronously and without any hidden
// synchronisation.

// Limits of a Batch, enforced before anything is allocated or launched.
const (
	// MaxBatchImages bounds the images of one batch.
	MaxBatchImages = 1 << 16
	// MaxImageBytes bounds one image's pixel bytes W·H·C (1 GiB), so that
	// every index inside the kernels fits in 32 bits, the uint16 scratch
	// included.
	MaxImageBytes = 1 << 30
	// ScratchAlign is the alignment of each image in the scratch buffer.
	ScratchAlign = 16
)

// BatchImage places one image in a device buffer: W×H pixels of C bytes,
// row 0 at byte Off of the buffer, rows Stride bytes apart.
type BatchImage struct {
	W, H, C int
	Off     uint64
	Stride  int
}

// span is the number of bytes from the image's first to one past its last
// pixel byte.
func (im BatchImage) span() uint64 {
	return uint64(im.H-1)*uint64(im.Stride) + uint64(im.W*im.C)
}

// shape is the image's geometry.
func (im BatchImage) shape() sched.Shape { return sched.Shape{W: im.W, H: im.H, C: im.C} }

func (im BatchImage) checkShape() error {
	switch {
	case im.C != 1 && im.C != 3:
		return fmt.Errorf("%d channels, want 1 or 3", im.C)
	case im.W < 1 || im.H < 1:
		return fmt.Errorf("size %dx%d, want at least 1x1", im.W, im.H)
	case int64(im.W)*int64(im.H)*int64(im.C) > MaxImageBytes:
		return fmt.Errorf("%dx%dx%d is over %d bytes", im.W, im.H, im.C, MaxImageBytes)
	}
	return nil
}

func (im BatchImage) check() error {
	if err := im.checkShape(); err != nil {
		return err
	}
	switch {
	case im.Stride < im.W*im.C:
		return fmt.Errorf("stride %d is less than width×channels %d", im.Stride, im.W*im.C)
	case im.Stride > math.MaxInt32:
		return fmt.Errorf("stride %d does not fit in 32 bits", im.Stride)
	case im.Off > math.MaxInt64-im.span():
		return fmt.Errorf("offset %d is out of range", im.Off)
	}
	return nil
}

// alignUp rounds n up to a multiple of a (a power of two).
func alignUp(n, a uint64) uint64 { return (n + a - 1) &^ (a - 1) }

// Batch is one op over a batch of images in device memory.
type Batch struct {
	Op sched.Op
	// Src are the images the op reads, in the source buffer.
	Src []BatchImage
	// Dst are where the results go, in the destination buffer, with the
	// shapes Op.OutShape gives. For a histogram op (Op.Hist) only Off
	// counts: the image's sched.HistBytes of counts, 8-byte aligned; Run
	// zeroes them first. For an encoding op (Op.Encode) too: the file, at
	// most Op.Encode.Bound of the source's shape bytes. For a reduction
	// (Op.Reduce) too: the array's float32 value.
	Dst []BatchImage
	// Dims are the axes of each array of Src, for an array op (Op.Array),
	// whose Src[i] is sched.ArrayShape of their product; nil for images.
	Dims [][]int
}

// ScratchLayout returns where the op's passes find each image in the scratch
// buffer (nil when its kernels place their own records there) and the
// scratch size: for a separable filter, rows of 2·W·C bytes, images aligned
// to ScratchAlign, at most 2·Σ(W·H·C) + ScratchAlign·n bytes. Ops whose
// launcher needs no scratch get nil, 0.
func (b *Batch) ScratchLayout() ([]BatchImage, uint64) {
	if l := launchers[b.Op.Name]; l != nil && l.scratch != nil {
		return l.scratch.layout(b.Src)
	}
	return nil, 0
}

// ScratchBytes is the size of the scratch buffer Run needs (0 for ops that
// use none).
func (b *Batch) ScratchBytes() uint64 {
	_, n := b.ScratchLayout()
	return n
}

// Check validates the batch: the op and its arguments, every placement, the
// output shapes, that no two outputs overlap, and the launch limits.
func (b *Batch) Check() error {
	if b.Op.Array {
		_, err := b.checkArrays()
		return err
	}
	_, err := b.plan()
	return err
}

// plan validates the batch and returns its launches, in order.
func (b *Batch) plan() ([]launch, error) {
	name := b.Op.String()
	l, err := launcherFor(b.Op)
	if err != nil {
		return nil, err
	}
	n := len(b.Src)
	switch {
	case len(b.Dst) != n:
		return nil, fmt.Errorf("%s: %d sources but %d destinations", name, n, len(b.Dst))
	case n > MaxBatchImages:
		return nil, fmt.Errorf("%s: %d images, at most %d", name, n, MaxBatchImages)
	case n == 0:
		return nil, nil
	}
	for i, s := range b.Src {
		if err := s.check(); err != nil {
			return nil, fmt.Errorf("%s: source %d: %w", name, i, err)
		}
		d := b.Dst[i]
		if b.Op.Encode != nil {
			if err := checkEncodeDst(b.Op, s, d); err != nil {
				return nil, fmt.Errorf("%s: file %d: %w", name, i, err)
			}
			continue
		}
		if b.Op.Hist {
			if d.Off%8 != 0 || d.Off > math.MaxInt64-sched.HistBytes {
				return nil, fmt.Errorf("%s: counts %d at offset %d, want a multiple of 8", name, i, d.Off)
			}
			continue
		}
		out := b.Op.OutShape(s.shape())
		if d.shape() != out {
			return nil, fmt.Errorf("%s: destination %d is %dx%dx%d, want %dx%dx%d", name, i, d.W, d.H, d.C, out.W, out.H, out.C)
		}
		if err := d.check(); err != nil {
			return nil, fmt.Errorf("%s: destination %d: %w", name, i, err)
		}
	}
	if err := checkDisjoint(b.dstRanges()); err != nil {
		return nil, fmt.Errorf("%s: destinations %w", name, err)
	}

	launches := l.plan(b.Op.Args)
	scratch, _ := b.ScratchLayout()
	for i := range launches {
		p := &launches[i]
		p.add(b.images(p.src, scratch), b.images(p.dst, scratch))
		if p.blocks > math.MaxInt32 {
			return nil, fmt.Errorf("%s: %d blocks in one launch, at most %d", name, p.blocks, math.MaxInt32)
		}
	}
	return launches, nil
}

// images are the placements a pass reads or writes in the buffer of role r.
func (b *Batch) images(r bufRole, scratch []BatchImage) []BatchImage {
	switch r {
	case roleSrc:
		return b.Src
	case roleDst:
		return b.Dst
	}
	return scratch
}

// byteRange is [lo, hi) of one buffer.
type byteRange struct{ lo, hi uint64 }

// dstRanges are the byte ranges the batch writes in Dst.
func (b *Batch) dstRanges() []byteRange {
	r := make([]byteRange, len(b.Dst))
	for i, d := range b.Dst {
		if b.Op.Encode != nil {
			r[i] = byteRange{d.Off, d.Off + uint64(b.Op.Encode.Bound(b.Src[i].shape()))}
		} else if b.Op.Hist {
			r[i] = byteRange{d.Off, d.Off + sched.HistBytes}
		} else if b.Op.Reduce != nil {
			r[i] = byteRange{d.Off, d.Off + sched.ElemBytes}
		} else {
			r[i] = byteRange{d.Off, d.Off + d.span()}
		}
	}
	return r
}

// extent returns the smallest range that covers rs.
func extent(rs []byteRange) byteRange {
	e := rs[0]
	for _, r := range rs[1:] {
		e.lo, e.hi = min(e.lo, r.lo), max(e.hi, r.hi)
	}
	return e
}

// checkDisjoint reports two overlapping ranges. Images are treated as their
// whole span, so an image placed inside another's row padding counts as an
// overlap: the kernels write rows concurrently, and a layout that interleaves
// images is almost certainly a mistake.
func checkDisjoint(rs []byteRange) error {
	idx := make([]int, len(rs))
	for i := range idx {
		idx[i] = i
	}
	slices.SortFunc(idx, func(a, b int) int {
		switch {
		case rs[a].lo < rs[b].lo:
			return -1
		case rs[a].lo > rs[b].lo:
			return 1
		}
		return a - b
	})
	for k := 1; k < len(idx); k++ {
		a, b := idx[k-1], idx[k]
		if rs[b].lo < rs[a].hi {
			return fmt.Errorf("%d and %d overlap", min(a, b), max(a, b))
		}
	}
	return nil
}

// EncodeTable writes the batch's launch tables (TableBytes long), which Run
// expects at Buffers.Table in device memory. dst may be page-locked memory
// that is then copied to the device together with the batch's input.
func (b *Batch) EncodeTable(dst []byte) error {
	if b.Op.Array {
		return b.encodeArrayTable(dst)
	}
	launches, err := b.plan()
	if err != nil {
		return err
	}
	if want := TableBytes(b.Op, len(b.Src)); len(dst) < want {
		return fmt.Errorf("%s: table buffer is %d bytes, need %d", b.Op, len(dst), want)
	}
	for _, p := range launches {
		for _, e := range p.entries {
			le := binary.LittleEndian
			le.PutUint64(dst[0:], e.srcOff)
			le.PutUint64(dst[8:], e.dstOff)
			for i, v := range [...]int32{e.w, e.h, e.c, e.srcStride, e.dstStride, e.block0, e.tilesX, e.reserve} {
				le.PutUint32(dst[16+4*i:], uint32(v))
			}
			dst = dst[kImgBytes:]
		}
	}
	if l := launchers[b.Op.Name]; l.extra > 0 {
		for i := range b.Src {
			l.encodeExtra(b.Op.Args, b.Src[i], b.Dst[i], dst[:l.extra])
			dst = dst[l.extra:]
		}
	}
	return nil
}

// Buffers are the device memory of one Run.
type Buffers struct {
	Src     cu.DevicePtr // the images of Batch.Src
	Dst     cu.DevicePtr // Batch.Dst (histogram: the counts)
	Scratch cu.DevicePtr // at least ScratchBytes, for the separable filters; else unused
	Table   cu.DevicePtr // the launch tables written by EncodeTable, already on the device
	Lens    cu.DevicePtr // an encoding op's file lengths, a uint32 per image; else unused
}

// check verifies that the pointers needed are set and that what the launch
// writes (Dst, scratch) overlaps nothing it reads or writes elsewhere: the
// kernels read their inputs while other blocks write, so an overlap would be
// a data race, not merely a wrong result.
func (buf Buffers) check(b *Batch, name string) error {
	type area struct {
		what  string
		r     byteRange
		write bool
	}
	abs := func(p cu.DevicePtr, r byteRange) byteRange { return byteRange{uint64(p) + r.lo, uint64(p) + r.hi} }
	src := make([]byteRange, len(b.Src))
	for i, s := range b.Src {
		src[i] = byteRange{s.Off, s.Off + s.span()}
	}
	if buf.Src == 0 || buf.Dst == 0 || buf.Table == 0 {
		return fmt.Errorf("%s: source, destination and table pointers must be set", name)
	}
	areas := []area{
		{"source", abs(buf.Src, extent(src)), false},
		{"destination", abs(buf.Dst, extent(b.dstRanges())), true},
		{"table", abs(buf.Table, byteRange{0, uint64(TableBytes(b.Op, len(b.Src)))}), false},
	}
	if n := b.ScratchBytes(); n > 0 {
		align := launchers[b.Op.Name].scratch.align
		switch {
		case buf.Scratch == 0:
			return fmt.Errorf("%s: needs %d bytes of scratch, none given", name, n)
		case align > 0 && uint64(buf.Scratch)%align != 0:
			return fmt.Errorf("%s: scratch at %#x is not aligned to %d bytes", name, uint64(buf.Scratch), align)
		}
		areas = append(areas, area{"scratch", abs(buf.Scratch, byteRange{0, n}), true})
	}
	if b.Op.Encode != nil {
		if buf.Lens == 0 {
			return fmt.Errorf("%s: an encoding op needs a lengths buffer", name)
		}
		areas = append(areas, area{"lengths", abs(buf.Lens, byteRange{0, 4 * uint64(len(b.Src))}), true})
	}
	for i, a := range areas {
		for _, c := range areas[i+1:] {
			if (a.write || c.write) && a.r.lo < c.r.hi && c.r.lo < a.r.hi {
				return fmt.Errorf("%s: %s buffer overlaps the %s buffer", name, a.what, c.what)
			}
		}
	}
	return nil
}

// mergeRanges sorts rs and joins ranges that touch or overlap, so that
// consecutive histograms are zeroed by one memset.
func mergeRanges(rs []byteRange) []byteRange {
	rs = slices.Clone(rs)
	slices.SortFunc(rs, func(a, b byteRange) int {
		switch {
		case a.lo < b.lo:
			return -1
		case a.lo > b.lo:
			return 1
		}
		return 0
	})
	out := rs[:0]
	for _, r := range rs {
		if len(out) > 0 && r.lo <= out[len(out)-1].hi {
			out[len(out)-1].hi = max(out[len(out)-1].hi, r.hi)
			continue
		}
		out = append(out, r)
	}
	return out
}
