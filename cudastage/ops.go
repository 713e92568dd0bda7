package cudastage

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"

	"github.com/imgpipe/imgpipe/cudastage/cu"
	"github.com/imgpipe/imgpipe/cudastage/sched"
	"github.com/imgpipe/imgpipe/kernels"
)

// Batched kernel launches.
//
// One Batch is one sched.Op (validated by sched.Op.Check) over a batch of
// images: a single kernel launch (two for the separable blurs) covers every
// image, whatever their sizes, through a launch table in device memory with
// one entry per image. The host code here plans everything (output
// placements, scratch placements, launch tables, grid sizes) in plain Go, so
// it is tested without a GPU; Kernels.Run only queues the memset (histogram) and launches on the caller's stream,
// asynchronously and without any hidden synchronisation.
//
// Chaining ops within a device segment: the Dst placements of one op are the
// Src placements of the next (Outputs computes them), except after the
// histogram, which passes its image through unchanged: the next op reads the
// histogram's Src.

// Kernel tiling constants, identical to the IMGPIPE_* macros of
// kernels/imgpipe.cu (TestKernelConstants reads them from the source).
const (
	kThreads       = 256
	kGrayPixels    = 16   // pixels per thread, grayscale and histogram
	kHistGroups    = 4    // pixel groups per thread, histogram
	kTrTileY       = 32   // transpose tile rows
	kTrTileX1      = 128  // transpose tile columns, C = 1
	kTrTileX3      = 32   // transpose tile columns, C = 3
	kHTile         = 1024 // horizontal pass: samples per block row
	kHRows         = 4    // horizontal pass: rows per block
	kVTileX        = 64   // vertical pass: samples per block row
	kVTileY        = 64   // vertical pass: rows per block
	kMaxBlurRadius = 96   // sched.MaxBlurTaps = 2·96+1 (TestKernelConstants)
	kMaxBoxRadius  = 15   // sched.MaxBoxRadius
	kImgBytes      = 48   // one launch-table entry
)

// Limits of a Batch, enforced before anything is allocated or launched.
const (
	// MaxBatchImages bounds the images of one batch.
	MaxBatchImages = 1 << 16
	// MaxImageBytes bounds one image's pixel bytes W·H·C (1 GiB), so that
	// every index inside the kernels fits in 32 bits, the uint16 scratch
	// included.
	MaxImageBytes = 1 << 30
	// HistBytes is one image's histogram in device memory: 256
	// little-endian uint64 counts, as the executor lays them out.
	HistBytes = sched.HistBytes
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

// shape is the image's geometry, as sched.Op.OutShape takes it.
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

// Pack places images of the given shapes (W, H, C; Off and Stride are
// ignored) one after another in one buffer, rows tightly packed (Stride =
// W·C) and each image's first byte aligned to align bytes, a power of two
// (16 or more keeps the kernels on their vector paths for widths that allow
// it). It returns the placements and the buffer size they need.
func Pack(shapes []BatchImage, align int) ([]BatchImage, uint64, error) {
	if align < 1 || align&(align-1) != 0 {
		return nil, 0, fmt.Errorf("pack: alignment %d is not a power of two", align)
	}
	if len(shapes) > MaxBatchImages {
		return nil, 0, fmt.Errorf("pack: %d images, at most %d", len(shapes), MaxBatchImages)
	}
	out := make([]BatchImage, len(shapes))
	var off uint64
	for i, s := range shapes {
		if err := s.checkShape(); err != nil {
			return nil, 0, fmt.Errorf("pack: image %d: %w", i, err)
		}
		off = alignUp(off, uint64(align))
		out[i] = BatchImage{W: s.W, H: s.H, C: s.C, Off: off, Stride: s.W * s.C}
		off += uint64(s.W * s.H * s.C)
	}
	return out, off, nil
}

// Outputs returns the Dst placements for op over src, packed as Pack does
// (align bytes), and the destination buffer size. For the histogram they are
// consecutive HistBytes count arrays (Off only; align is ignored).
func Outputs(op sched.Op, src []BatchImage, align int) ([]BatchImage, uint64, error) {
	if op.Kind == sched.OpHistogram {
		if len(src) > MaxBatchImages {
			return nil, 0, fmt.Errorf("outputs: %d images, at most %d", len(src), MaxBatchImages)
		}
		out := make([]BatchImage, len(src))
		for i := range out {
			out[i] = BatchImage{Off: uint64(i) * HistBytes}
		}
		return out, uint64(len(src)) * HistBytes, nil
	}
	shapes := make([]BatchImage, len(src))
	for i, s := range src {
		out := op.OutShape(s.shape())
		shapes[i] = BatchImage{W: out.W, H: out.H, C: out.C}
	}
	return Pack(shapes, align)
}

// Batch is one op over a batch of images in device memory.
type Batch struct {
	Op sched.Op
	// Src are the images the op reads, in the source buffer.
	Src []BatchImage
	// Dst are where the results go, in the destination buffer, with the
	// shapes Op.OutShape gives. For sched.OpHistogram only Off counts: the image's
	// HistBytes of counts, 8-byte aligned; Run zeroes them first.
	Dst []BatchImage
}

// kernel indexes the functions of the module.
type kernel int

const (
	kGrayscale kernel = iota
	kHistogram
	kTranspose
	kBlurH
	kBlurV
	kBoxH
	kBoxV
	numKernels
)

var kernelNames = [numKernels]string{
	kGrayscale: "imgpipe_grayscale",
	kHistogram: "imgpipe_histogram",
	kTranspose: "imgpipe_transpose",
	kBlurH:     "imgpipe_blur_h",
	kBlurV:     "imgpipe_blur_v",
	kBoxH:      "imgpipe_box_h",
	kBoxV:      "imgpipe_box_v",
}

// bufRole names which of the launch's buffers a pass reads or writes.
type bufRole int

const (
	roleSrc bufRole = iota
	roleDst
	roleScratch
)

// pass is one kernel launch of a batch.
type pass struct {
	fn       kernel
	src, dst bufRole
	entries  []entry
	blocks   int    // grid size: the sum of the images' tiles
	smem     uint32 // dynamic shared memory bytes
}

// entry mirrors struct Img of imgpipe.cu.
type entry struct {
	srcOff, dstOff          uint64
	w, h, c                 int32
	srcStride, dstStride    int32
	block0, tilesX, reserve int32
}

// ceilDiv is ⌈a/b⌉ for positive b.
func ceilDiv(a, b int64) int64 { return (a + b - 1) / b }

// tiles returns the number of blocks a kernel spends on a w×h×c source
// image and the tiles_x field of its entry; see each kernel's comment in
// imgpipe.cu.
func tiles(fn kernel, w, h, c int) (blocks, tilesX int64) {
	W, H, C := int64(w), int64(h), int64(c)
	switch fn {
	case kGrayscale:
		tilesX = ceilDiv(W, kGrayPixels)
		return ceilDiv(tilesX*H, kThreads), tilesX
	case kHistogram:
		tilesX = ceilDiv(W, kGrayPixels)
		return ceilDiv(tilesX*H, kThreads*kHistGroups), tilesX
	case kTranspose:
		tx := int64(kTrTileX1)
		if c == 3 {
			tx = kTrTileX3
		}
		tilesX = ceilDiv(W, tx)
		return tilesX * ceilDiv(H, kTrTileY), tilesX
	case kBlurH, kBoxH:
		tilesX = ceilDiv(W*C, kHTile)
		return tilesX * ceilDiv(H, kHRows), tilesX
	case kBlurV, kBoxV:
		tilesX = ceilDiv(W*C, kVTileX)
		return tilesX * ceilDiv(H, kVTileY), tilesX
	}
	panic("cudastage: unknown kernel")
}

// ScratchLayout returns where the separable filters keep each image's
// uint16 intermediate in the scratch buffer (rows of 2·W·C bytes, images
// aligned to ScratchAlign) and the scratch size: at most 2·Σ(W·H·C) +
// ScratchAlign·n bytes. Other ops need no scratch (nil, 0).
func (b *Batch) ScratchLayout() ([]BatchImage, uint64) {
	if b.Op.Kind != sched.OpBlur && b.Op.Kind != sched.OpBoxBlur {
		return nil, 0
	}
	out := make([]BatchImage, len(b.Src))
	var off uint64
	for i, s := range b.Src {
		off = alignUp(off, ScratchAlign)
		out[i] = BatchImage{W: s.W, H: s.H, C: s.C, Off: off, Stride: 2 * s.W * s.C}
		off += 2 * uint64(s.W) * uint64(s.H) * uint64(s.C)
	}
	return out, off
}

// ScratchBytes is the size of the scratch buffer Run needs (0 for ops that
// use none).
func (b *Batch) ScratchBytes() uint64 {
	_, n := b.ScratchLayout()
	return n
}

// MaxScratchBytes bounds ScratchBytes for op over n images whose pixels take
// srcBytes in all, for callers that size one scratch buffer per stream.
func MaxScratchBytes(op sched.Op, srcBytes uint64, n int) uint64 {
	if op.Kind != sched.OpBlur && op.Kind != sched.OpBoxBlur {
		return 0
	}
	return 2*srcBytes + ScratchAlign*uint64(n)
}

// TableBytes is the size of the launch tables of op over n images, which
// EncodeTable writes and Run reads from device memory.
func TableBytes(op sched.Op, n int) int {
	if op.Kind == sched.OpBlur || op.Kind == sched.OpBoxBlur {
		return 2 * n * kImgBytes
	}
	return n * kImgBytes
}

// Check validates the batch: the op's parameters, every placement, the
// output shapes, that no two outputs overlap, and the launch limits.
func (b *Batch) Check() error {
	_, err := b.plan()
	return err
}

// plan validates the batch and returns its launches, in order.
func (b *Batch) plan() ([]pass, error) {
	name := b.Op.Kind.String()
	if err := b.Op.Check(); err != nil {
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
		if b.Op.Kind == sched.OpHistogram {
			if d.Off%8 != 0 || d.Off > math.MaxInt64-HistBytes {
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

	var passes []pass
	switch b.Op.Kind {
	case sched.OpGrayscale:
		passes = []pass{b.direct(kGrayscale)}
	case sched.OpHistogram:
		passes = []pass{b.direct(kHistogram)}
	case sched.OpTranspose:
		passes = []pass{b.direct(kTranspose)}
	case sched.OpBlur, sched.OpBoxBlur:
		h, v, r := kBlurH, kBlurV, len(b.Op.Taps)/2
		if b.Op.Kind == sched.OpBoxBlur {
			h, v, r = kBoxH, kBoxV, b.Op.Radius
		}
		tmp, _ := b.ScratchLayout()
		ph := pass{fn: h, src: roleSrc, dst: roleScratch}
		pv := pass{fn: v, src: roleScratch, dst: roleDst, smem: uint32((kVTileY + 2*r) * kVTileX * 2)}
		ph.add(b.Src, tmp)
		pv.add(tmp, b.Dst)
		passes = []pass{ph, pv}
	}
	for _, p := range passes {
		if p.blocks > math.MaxInt32 {
			return nil, fmt.Errorf("%s: %d blocks in one launch, at most %d", name, p.blocks, math.MaxInt32)
		}
	}
	return passes, nil
}

// direct is the single pass of an op that reads Src and writes Dst.
func (b *Batch) direct(fn kernel) pass {
	p := pass{fn: fn, src: roleSrc, dst: roleDst}
	p.add(b.Src, b.Dst)
	return p
}

// add appends the entries for images src → dst, giving each its blocks.
func (p *pass) add(src, dst []BatchImage) {
	p.entries = make([]entry, len(src))
	for i, s := range src {
		blocks, tx := tiles(p.fn, s.W, s.H, s.C)
		p.entries[i] = entry{
			srcOff: s.Off, dstOff: dst[i].Off,
			w: int32(s.W), h: int32(s.H), c: int32(s.C),
			srcStride: int32(s.Stride), dstStride: int32(dst[i].Stride),
			block0: int32(min(p.blocks, math.MaxInt32)), tilesX: int32(tx),
		}
		p.blocks += int(blocks)
	}
}

// byteRange is [lo, hi) of one buffer.
type byteRange struct{ lo, hi uint64 }

// dstRanges are the byte ranges the batch writes in Dst.
func (b *Batch) dstRanges() []byteRange {
	r := make([]byteRange, len(b.Dst))
	for i, d := range b.Dst {
		if b.Op.Kind == sched.OpHistogram {
			r[i] = byteRange{d.Off, d.Off + HistBytes}
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
	passes, err := b.plan()
	if err != nil {
		return err
	}
	if want := TableBytes(b.Op, len(b.Src)); len(dst) < want {
		return fmt.Errorf("%s: table buffer is %d bytes, need %d", b.Op.Kind, len(dst), want)
	}
	for _, p := range passes {
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
	return nil
}

// Buffers are the device memory of one Run.
type Buffers struct {
	Src     cu.DevicePtr // the images of Batch.Src
	Dst     cu.DevicePtr // Batch.Dst (histogram: the counts)
	Scratch cu.DevicePtr // at least ScratchBytes, for the blurs; else unused
	Table   cu.DevicePtr // the launch tables written by EncodeTable, already on the device
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
		if buf.Scratch == 0 {
			return fmt.Errorf("%s: needs %d bytes of scratch, none given", name, n)
		}
		areas = append(areas, area{"scratch", abs(buf.Scratch, byteRange{0, n}), true})
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

// Kernels are the batched kernels loaded into one CUDA context. Load them
// once per context (loading costs milliseconds) and keep them as long as the
// context; every method must be called with that context current (inside
// GPU.Do or a goroutine bound with GPU.Bind). A Kernels value is safe for
// concurrent use on different streams.
type Kernels struct {
	mod cu.Module
	fn  [numKernels]cu.Function
}

// LoadKernels loads the embedded kernels (kernels.Fatbin) into the current
// context.
func LoadKernels() (*Kernels, error) { return NewKernels(kernels.Fatbin) }

// NewKernels loads kernels from a module image (a fatbin, cubin or PTX that
// defines every imgpipe_* kernel) into the current context.
func NewKernels(image []byte) (*Kernels, error) {
	mod, err := cu.ModuleLoadData(image)
	if err != nil {
		return nil, fmt.Errorf("loading the imgpipe kernels: %w", err)
	}
	k := &Kernels{mod: mod}
	for i, name := range kernelNames {
		if k.fn[i], err = mod.Function(name); err != nil {
			mod.Unload()
			return nil, fmt.Errorf("loading the imgpipe kernels: %w", err)
		}
	}
	return k, nil
}

// Unload unloads the module; work already queued that uses it must be
// finished.
func (k *Kernels) Unload() error { return k.mod.Unload() }

// tapsParam mirrors struct Taps of imgpipe.cu: a by-value kernel parameter.
type tapsParam struct {
	R int32
	W [2*kMaxBlurRadius + 1]uint32
}

// Run queues the batch's kernels on stream s: for the histogram first a
// memset of its counts, then one launch (two for blur and boxblur, through
// the scratch buffer). It returns once the work is queued; errors found at
// queue time come back here, errors during execution at the next
// synchronisation (a *cu.Error, sticky for a fault). An empty batch queues
// nothing.
func (k *Kernels) Run(s cu.Stream, b *Batch, buf Buffers) error {
	passes, err := b.plan()
	if err != nil || len(passes) == 0 {
		return err
	}
	name := b.Op.Kind.String()
	if err := buf.check(b, name); err != nil {
		return err
	}
	if b.Op.Kind == sched.OpHistogram {
		for _, r := range mergeRanges(b.dstRanges()) {
			if err := cu.MemsetD8Async(buf.Dst+cu.DevicePtr(r.lo), 0, r.hi-r.lo, s); err != nil {
				return fmt.Errorf("%s: zeroing the counts: %w", name, err)
			}
		}
	}
	var taps tapsParam
	radius := int32(b.Op.Radius)
	if b.Op.Kind == sched.OpBlur {
		taps.R = int32(len(b.Op.Taps) / 2)
		copy(taps.W[:], b.Op.Taps)
	}
	n := int32(len(b.Src))
	table := buf.Table
	roles := [...]cu.DevicePtr{roleSrc: buf.Src, roleDst: buf.Dst, roleScratch: buf.Scratch}
	for _, p := range passes {
		args := []any{&table, &n, &roles[p.src], &roles[p.dst]}
		switch p.fn {
		case kBlurH, kBlurV:
			args = append(args, &taps)
		case kBoxH, kBoxV:
			args = append(args, &radius)
		}
		if err := k.launch(p.fn, p.blocks, p.smem, s, args...); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		table += cu.DevicePtr(len(p.entries) * kImgBytes)
	}
	return nil
}

// launch queues one kernel with a 1-D grid of blocks of kThreads threads.
func (k *Kernels) launch(fn kernel, blocks int, smem uint32, s cu.Stream, args ...any) error {
	if blocks < 0 || blocks > math.MaxUint32 {
		return fmt.Errorf("%s: grid of %d blocks", kernelNames[fn], blocks)
	}
	return cu.LaunchKernel(k.fn[fn], [3]uint32{uint32(blocks), 1, 1}, [3]uint32{kThreads, 1, 1}, smem, s, args...)
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
