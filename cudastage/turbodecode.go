package cudastage

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"unsafe"

	"github.com/imgpipe/imgpipe/cudastage/cu"
	"github.com/imgpipe/imgpipe/cudastage/jpegdec"
	"github.com/imgpipe/imgpipe/cudastage/sched"
)

// The kernels of kernels/jpegdec.cu and their constants (mirrored from there; a CPU test
// reads them from the source).
const (
	jpegSubBits   = 2048 // IMGPIPE_JPEG_SUB_BITS: bits per subsequence
	jpegImgBytes  = 1080 // sizeof(JImg)
	jpegTabBytes  = 1424 // sizeof(JTab)
	jpegSegBytes  = 48   // sizeof(JSeg)
	jpegCtxBytes  = 200  // sizeof(JCtx)
	jpegBadShort  = 2    // IMGPIPE_JPEG_BAD_SHORT
	jpegMaxRounds = 64   // synchronisation rounds before the unsettled segments are decoded serially
	// jpegRoundsPerCheck is how many rounds run between two reads of the "moved" flag: a round
	// after the one where nothing moved only copies the states, so the host waits for the
	// device every few rounds instead of every round (photos need up to about 9).
	jpegRoundsPerCheck = 4
	// jpegChunkBytes bounds the device memory of one pass over a call's images: a call's
	// images are decoded in as many passes as that takes (one at least, whatever its size).
	// An image's share is at most jpegCoefBytes per pixel of the full size (128-byte
	// coefficient blocks, 3 per 64 pixels in 4:4:4, 1.5 in 4:2:0), jpegPlaneBytes per output
	// pixel for its component planes, and jpegOrientBytes more for its upright copy when the
	// EXIF orientation turns it.
	jpegChunkBytes  = 1 << 30
	jpegCoefBytes   = 6
	jpegPlaneBytes  = 3
	jpegOrientBytes = 3
)

var jpegKernels = []string{"jpeg_sync", "jpeg_mark", "jpeg_count", "jpeg_scan", "jpeg_write", "jpeg_serial", "jpeg_idct", "jpeg_rgb"}

// turboCodec is a Device's sched.RouteTurbo side: each stream's buffers, kept for its next calls.
type turboCodec struct {
	mu      sync.Mutex
	streams map[sched.Stream]*turboStream
	scratch sync.Pool // *[]byte, for TurboRoute's parses
}

// turboStream is one stream's page-locked staging and device memory, grown as needed.
type turboStream struct {
	host    []byte
	dev     cu.DevicePtr
	devN    uint64
	orient  cu.DevicePtr // upright images of oriented files, before Orient turns them
	orientN uint64
}

var _ sched.TurboDecoder = (*Device)(nil)

// TurboRoute implements sched.TurboDecoder: sched.RouteTurbo for a baseline JPEG that package
// jpegdec takes, else "" (libjpeg-turbo on the CPU, or nvJPEG, gives its verdict on the
// others).
func (d *Device) TurboRoute(data []byte) string {
	bp, _ := d.turbo.scratch.Get().(*[]byte)
	if bp == nil {
		bp = new([]byte)
	}
	_, buf, err := jpegdec.Parse(data, (*bp)[:0])
	*bp = buf
	d.turbo.scratch.Put(bp)
	if err != nil {
		return ""
	}
	return sched.RouteTurbo
}

// TurboBatch implements sched.TurboDecoder: by 56 photos a call, the kernels' fixed costs
// are paid (bench/results/2026-12-07-code-comments.md#cudastage).
func (d *Device) TurboBatch() int { return 56 }

func (t *turboCodec) forStream(s sched.Stream) *turboStream {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.streams == nil {
		t.streams = map[sched.Stream]*turboStream{}
	}
	ts := t.streams[s]
	if ts == nil {
		ts = &turboStream{}
		t.streams[s] = ts
	}
	return ts
}

// dropStream frees stream s's buffers (after its work: cuMemFree waits for the device).
func (t *turboCodec) dropStream(s sched.Stream) error {
	t.mu.Lock()
	ts := t.streams[s]
	delete(t.streams, s)
	t.mu.Unlock()
	if ts == nil {
		return nil
	}
	return ts.free()
}

func (t *turboCodec) close() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	var errs []error
	for s, ts := range t.streams {
		errs = append(errs, ts.free())
		delete(t.streams, s)
	}
	return errors.Join(errs...)
}

func (ts *turboStream) free() error {
	var errs []error
	if ts.host != nil {
		errs = append(errs, cu.MemFreeHost(ts.host))
	}
	if ts.dev != 0 {
		errs = append(errs, cu.MemFree(ts.dev))
	}
	if ts.orient != 0 {
		errs = append(errs, cu.MemFree(ts.orient))
	}
	*ts = turboStream{}
	return errors.Join(errs...)
}

// grow makes *p at least n bytes of device memory (cuMemFree waits for work using the old one).
func grow(p *cu.DevicePtr, have *uint64, n uint64) error {
	if n <= *have {
		return nil
	}
	if *p != 0 {
		if err := cu.MemFree(*p); err != nil {
			return err
		}
		*p, *have = 0, 0
	}
	n += n / 4 // room for the next, slightly larger call
	q, err := cu.MemAlloc(n)
	if err != nil {
		return err
	}
	*p, *have = q, n
	return nil
}

// growHost makes the staging at least n bytes, keeping its first keep bytes.
func (ts *turboStream) growHost(n, keep int) error {
	if n <= len(ts.host) {
		return nil
	}
	b, err := cu.MemHostAlloc(n + n/4)
	if err != nil {
		return err
	}
	if ts.host != nil {
		copy(b, ts.host[:keep])
		if err := cu.MemFreeHost(ts.host); err != nil {
			cu.MemFreeHost(b)
			return err
		}
	}
	ts.host = b
	return nil
}

// turboImage is one image of a pass: its frame, record, and where its scan lies in the staging.
type turboImage struct {
	call    int // index in the DecodeCall
	f       *jpegdec.Frame
	rec     jpegImg
	scanOff int
}

// decodeTurbo decodes images idx of call (routed sched.RouteTurbo) on stream s, in passes of at most
// jpegChunkBytes of device memory (turboPasses). A file the parser now refuses, whose data the
// kernels find corrupt, or that alone does not fit in the device's memory, fails alone; the
// returned error is the device's.
func (d *Device) decodeTurbo(s sched.Stream, call *sched.DecodeCall, idx []int) error {
	ts := d.turbo.forStream(s)
	bytesOf := func(i int) int {
		im := &call.Images[i]
		out, scale := im.Shape.W*im.Shape.H, max(1, im.Scale)
		n := jpegCoefBytes*out*scale*scale + jpegPlaneBytes*out // the coefficients are the full size's
		if im.Orient != 1 {
			n += jpegOrientBytes * out
		}
		return n
	}
	pass := func(idx []int) error { return d.turboPass(ts, cu.Stream(s), call, idx) }
	fail := func(i int, err error) {
		im := &call.Images[i]
		im.Err = fmt.Errorf("%s: the %dx%d image does not fit in the memory left: %w", sched.RouteTurbo, im.Shape.W, im.Shape.H, err)
	}
	release := func() error { // after the stream's work that may still use the memory
		if err := cu.Stream(s).Synchronize(); err != nil {
			return d.g.Check(err)
		}
		return d.g.Check(ts.free())
	}
	return turboPasses(idx, bytesOf, pass, release, fail)
}

// turboPasses runs pass over idx in order, as many images at a time as fit in jpegChunkBytes
// by bytesOf. A pass that runs out of memory (the device's, or page-locked host memory) gives
// its memory back (release) and is retried with half as many images, and later passes keep
// that size: the stream's memory is outside the executor's accounting, and a smaller GPU, or
// one shared with other work, should slow the run down rather than end it. An image that runs
// out of memory alone fails alone (fail). Any other error ends the call.
func turboPasses(idx []int, bytesOf func(int) int, pass func([]int) error, release func() error, fail func(int, error)) error {
	most := len(idx) // images per pass, halved by each out-of-memory
	for len(idx) > 0 {
		n, bytes := 0, 0
		for n < min(len(idx), most) {
			b := bytesOf(idx[n])
			if n > 0 && bytes+b > jpegChunkBytes {
				break
			}
			bytes += b
			n++
		}
		err := pass(idx[:n])
		if cu.IsOutOfMemory(err) {
			if rerr := release(); rerr != nil {
				return errors.Join(err, rerr)
			}
			if n > 1 {
				most = n / 2
				continue
			}
			fail(idx[0], err)
		} else if err != nil {
			return err
		}
		idx = idx[n:]
	}
	return nil
}

// turboPass decodes images idx of call in one pass: it parses them into the stream's staging,
// lays out the kernels' tables behind them and runs the kernels (turboLaunch).
func (d *Device) turboPass(ts *turboStream, s cu.Stream, call *sched.DecodeCall, idx []int) error {
	// Staging layout: ctx | scans | images | tables | segments | subsequence→segment | readback.
	need := sched.AlignUp(jpegCtxBytes)
	for _, i := range idx {
		need += len(call.Images[i].Data)
	}
	need = sched.AlignUp(need + 8)
	if err := ts.growHost(need, 0); err != nil {
		return d.g.Check(err)
	}
	scanBase := sched.AlignUp(jpegCtxBytes)
	scan := ts.host[scanBase:scanBase]
	var imgs []turboImage
	for _, i := range idx {
		im := &call.Images[i]
		off := len(scan)
		f, grown, err := jpegdec.Parse(im.Data, scan)
		if err == nil && unsafe.SliceData(grown) != unsafe.SliceData(scan) {
			err = errors.New("its scan outgrew the staging buffer") // never: a scan is shorter than its file
		}
		if err != nil {
			im.Err = fmt.Errorf("%s: %w", sched.RouteTurbo, err)
			continue
		}
		scan = grown
		t := turboImage{call: i, f: f, scanOff: off}
		if err := jpegGeometry(&t.rec, f, max(1, im.Scale)); err != nil {
			im.Err = fmt.Errorf("%s: %w", sched.RouteTurbo, err)
			continue
		}
		if t.rec.OW != int32(storedW(im)) || t.rec.OH != int32(storedH(im)) {
			im.Err = fmt.Errorf("%s: the file is %dx%d, not the reserved %dx%d", sched.RouteTurbo, t.rec.OW, t.rec.OH, storedW(im), storedH(im))
			continue
		}
		imgs = append(imgs, t)
	}
	if len(imgs) == 0 {
		return nil
	}
	scanLen := len(scan)
	nw := int64(scanLen+3) / 4
	// pad the scans to whole words, plus one word the kernel may read past the last
	for k := scanLen; k < int(nw+1)*4 && scanBase+k < len(ts.host); k++ {
		ts.host[scanBase+k] = 0
	}
	// tables, segments, subsequences, blocks, planes, output pixels
	var tabs []jpegdec.Table
	var segs []jpegSeg
	var subseg []int32
	var nblk, nrgb, planes int64
	var orientBytes int64
	for k := range imgs {
		t := &imgs[k]
		f, r := t.f, &t.rec
		r.W, r.H, r.NC = int32(f.Width), int32(f.Height), int32(len(f.Comps))
		r.MX, r.MY, r.RI, r.NSeg = int32(f.MCUsX), int32(f.MCUsY), int32(f.Restart), int32(len(f.SegEnds))
		r.HMax, r.VMax = int32(f.HMax), int32(f.VMax)
		if len(f.Comps) == 1 {
			r.Gray = 1
		}
		r.BPM = 0
		for c, comp := range f.Comps {
			h, v := comp.H, comp.V
			if len(f.Comps) == 1 {
				h, v = 1, 1
			}
			r.HS[c], r.VS[c] = int32(h), int32(v)
			r.DCT[c], r.ACT[c] = int32(len(tabs)+comp.DC), int32(len(tabs)+comp.AC)
			for j := range comp.Quant {
				r.QT[c][j] = int32(comp.Quant[j])
			}
			for b := 0; b < h*v; b++ {
				r.SlotC[r.BPM] = int32(c)
				r.BPM++
			}
		}
		tabs = append(tabs, f.Tables...)
		mcus := int64(f.MCUsX) * int64(f.MCUsY)
		ri := int64(f.Restart)
		if ri == 0 {
			ri = mcus
		}
		r.Blk0, r.NBlk = nblk, mcus*int64(r.BPM)
		prev := 0
		for si, end := range f.SegEnds {
			m := min(ri, mcus-int64(si)*ri)
			sg := jpegSeg{Start: 8 * int64(t.scanOff+prev), End: 8 * int64(t.scanOff+end), Sub0: int64(len(subseg)),
				Blk0: nblk, Blocks: m * int64(r.BPM), Img: int32(k)}
			sg.NSub = int32(max(1, (sg.End-sg.Start+jpegSubBits-1)/jpegSubBits))
			for j := int32(0); j < sg.NSub; j++ {
				subseg = append(subseg, int32(len(segs)))
			}
			segs = append(segs, sg)
			nblk += sg.Blocks
			prev = end
		}
		for c := range f.Comps {
			r.POff[c] = planes
			planes += int64(r.PW[c]) * int64(r.PH[c])
		}
		px := int64(r.OW) * int64(r.OH)
		r.RGB0, r.NRGB = nrgb, ceilDiv(px, kThreads)
		nrgb += r.NRGB
		im := &call.Images[t.call]
		if im.Orient == 1 {
			r.Out = int64(call.Dst) + int64(im.DstOff)
		} else {
			r.Out = orientBytes // an offset in ts.orient until it is known
			orientBytes += int64(sched.AlignUp(int(3 * px)))
		}
	}
	if err := grow(&ts.orient, &ts.orientN, uint64(max(orientBytes, 1))); err != nil {
		return d.g.Check(err)
	}
	for k := range imgs {
		if call.Images[imgs[k].call].Orient != 1 {
			imgs[k].rec.Out += int64(ts.orient)
		}
	}
	nsub := int64(len(subseg))
	// the arena: the staged part, then the device-only tables
	off := sched.AlignUp(scanBase + int(nw+1)*4)
	imgOff := off
	off = sched.AlignUp(off + len(imgs)*jpegImgBytes)
	tabOff := off
	off = sched.AlignUp(off + len(tabs)*jpegTabBytes)
	segOff := off
	off = sched.AlignUp(off + len(segs)*jpegSegBytes)
	subOff := off
	off = sched.AlignUp(off + 4*int(nsub))
	staged := off
	// the tables and the readback (flag, badpos, bad) after the scans, which stay
	if err := ts.growHost(staged+8+12*len(imgs), scanBase+int(nw+1)*4); err != nil {
		return d.g.Check(err)
	}
	region := func(n int64) int64 { o := int64(off); off = sched.AlignUp(off + int(n)); return o }
	e0, e1, ch0, ch1 := region(16*nsub), region(16*nsub), region(nsub), region(nsub)
	cnt, sums, blk, pred := region(4*nsub), region(12*nsub), region(8*nsub), region(12*nsub)
	coef, bad, badpos := region(128*nblk), region(4*int64(len(imgs))), region(8*int64(len(imgs)))
	segslow, flag := region(int64(len(segs))), region(4)
	planeOff := region(planes)
	if err := grow(&ts.dev, &ts.devN, uint64(off)); err != nil {
		return d.g.Check(err)
	}
	base := uint64(ts.dev)
	ctx := jpegCtx{Im: base + uint64(imgOff), Tab: base + uint64(tabOff), W: base + uint64(scanBase), Segs: base + uint64(segOff),
		Subseg: base + uint64(subOff), E0: base + uint64(e0), E1: base + uint64(e1), Ch0: base + uint64(ch0), Ch1: base + uint64(ch1),
		Cnt: base + uint64(cnt), Sums: base + uint64(sums), Blk: base + uint64(blk), Pred: base + uint64(pred), Coef: base + uint64(coef),
		Bad: base + uint64(bad), BadPos: base + uint64(badpos), Segslow: base + uint64(segslow), Planes: base + uint64(planeOff), Flag: base + uint64(flag),
		NW: nw, NSub: nsub, NSeg: int64(len(segs)), NImg: int64(len(imgs)), NBlk: nblk, NRGB: nrgb}
	h := ts.host
	if _, err := binary.Encode(h[0:], binary.LittleEndian, &ctx); err != nil {
		return err
	}
	for k := range imgs {
		if _, err := binary.Encode(h[imgOff+k*jpegImgBytes:], binary.LittleEndian, &imgs[k].rec); err != nil {
			return err
		}
	}
	for k := range tabs {
		if _, err := binary.Encode(h[tabOff+k*jpegTabBytes:], binary.LittleEndian, &tabs[k]); err != nil {
			return err
		}
	}
	for k := range segs {
		if _, err := binary.Encode(h[segOff+k*jpegSegBytes:], binary.LittleEndian, &segs[k]); err != nil {
			return err
		}
	}
	if _, err := binary.Encode(h[subOff:], binary.LittleEndian, subseg); err != nil {
		return err
	}
	return d.turboLaunch(ts, s, call, imgs, staged, ctx)
}

// storedW and storedH are the upright size of the image before orientation (DecodeImage.Shape
// is after it).
func storedW(im *sched.DecodeImage) int {
	if im.Orient >= 5 {
		return im.Shape.H
	}
	return im.Shape.W
}

func storedH(im *sched.DecodeImage) int {
	if im.Orient >= 5 {
		return im.Shape.W
	}
	return im.Shape.H
}

// turboLaunch copies the staged tables over and runs the passes of kernels/jpegdec.cu; then it
// turns oriented images into place and reads each image's verdict.
func (d *Device) turboLaunch(ts *turboStream, s cu.Stream, call *sched.DecodeCall, imgs []turboImage, staged int, ctx jpegCtx) error {
	base := ts.dev
	if err := cu.MemcpyHtoDAsync(base, ts.host[:staged], s); err != nil {
		return d.g.Check(err)
	}
	for _, z := range []struct {
		p cu.DevicePtr
		n int64
		v byte
	}{{cu.DevicePtr(ctx.Coef), 128 * ctx.NBlk, 0}, {cu.DevicePtr(ctx.Bad), 4 * ctx.NImg, 0}, {cu.DevicePtr(ctx.BadPos), 8 * ctx.NImg, 0xFF},
		{cu.DevicePtr(ctx.Segslow), ctx.NSeg, 0}} {
		if err := cu.MemsetD8Async(z.p, z.v, uint64(z.n), s); err != nil {
			return d.g.Check(err)
		}
	}
	launch := func(name string, n int64, args ...any) error {
		fn, ok := d.k.fn[name]
		if !ok {
			return fmt.Errorf("%s: kernel %s is not loaded", sched.RouteTurbo, name)
		}
		if n == 0 {
			return nil
		}
		return cu.LaunchKernel(fn, [3]uint32{uint32(ceilDiv(n, kThreads)), 1, 1}, [3]uint32{kThreads, 1, 1}, 0, s, append([]any{&base}, args...)...)
	}
	readback := ts.host[staged : staged+8+12*len(imgs)]
	round := int32(0)
	for ; ; round++ {
		if err := cu.MemsetD8Async(cu.DevicePtr(ctx.Flag), 0, 4, s); err != nil {
			return d.g.Check(err)
		}
		if err := launch("jpeg_sync", ctx.NSub, &round); err != nil {
			return d.g.Check(err)
		}
		if (round+1)%jpegRoundsPerCheck != 0 {
			continue
		}
		if err := cu.MemcpyDtoHAsync(readback[:4], cu.DevicePtr(ctx.Flag), s); err != nil {
			return d.g.Check(err)
		}
		if err := s.Synchronize(); err != nil {
			return d.g.Check(err)
		}
		moved := binary.LittleEndian.Uint32(readback) != 0
		if !moved {
			break
		}
		if round+1 == jpegMaxRounds {
			final := round + 1
			if err := launch("jpeg_mark", ctx.NSub, &final); err != nil {
				return d.g.Check(err)
			}
			break
		}
	}
	final := round + 1
	steps := []struct {
		name string
		n    int64
		args []any
	}{
		{"jpeg_count", ctx.NSub, []any{&final}},
		{"jpeg_scan", 32 * ctx.NSeg, nil}, // a warp per segment
		{"jpeg_write", ctx.NSub, []any{&final}},
		{"jpeg_serial", ctx.NSeg, nil},
		{"jpeg_idct", ctx.NBlk, nil},
		{"jpeg_rgb", ctx.NRGB * kThreads, nil},
	}
	for _, st := range steps {
		if err := launch(st.name, st.n, st.args...); err != nil {
			return d.g.Check(err)
		}
	}
	for _, t := range imgs {
		im := &call.Images[t.call]
		if im.Orient == 1 {
			continue
		}
		out := cu.DevicePtr(call.Dst) + cu.DevicePtr(im.DstOff)
		if err := d.k.Orient(s, cu.DevicePtr(t.rec.Out), int(t.rec.OW), int(t.rec.OH), out, im.Orient); err != nil {
			return d.g.Check(err)
		}
	}
	n := len(imgs)
	badAt := readback[8 : 8+8*n]
	shortAt := readback[8+8*n : 8+12*n]
	if err := cu.MemcpyDtoHAsync(badAt, cu.DevicePtr(ctx.BadPos), s); err != nil {
		return d.g.Check(err)
	}
	if err := cu.MemcpyDtoHAsync(shortAt, cu.DevicePtr(ctx.Bad), s); err != nil {
		return d.g.Check(err)
	}
	if err := s.Synchronize(); err != nil {
		return d.g.Check(err)
	}
	for k, t := range imgs {
		im := &call.Images[t.call]
		pos := binary.LittleEndian.Uint64(badAt[8*k:])
		switch {
		case binary.LittleEndian.Uint32(shortAt[4*k:])&jpegBadShort != 0:
			im.Err = fmt.Errorf("%s: Corrupt JPEG data: premature end of data segment", sched.RouteTurbo)
		case pos != ^uint64(0) && warnsBadCode(t, im.Data, int64(pos)):
			im.Err = fmt.Errorf("%s: Corrupt JPEG data: bad Huffman code", sched.RouteTurbo)
		}
	}
	return nil
}

// warnsBadCode reports whether libjpeg-turbo warns of a bad Huffman code at bit pos of the
// call's scans (the CPU's decoder then fails the file). Its fast path, which decodes an MCU
// while at least 512 bytes per block are left in the file and there are no restart markers,
// reads a bad code as symbol 0 and says nothing; the slow path says "Corrupt JPEG data". The
// bytes left are counted from the bad code, not from the start of its MCU as libjpeg counts
// them, and without stuffed bytes: a bad code within about an MCU's bytes of that limit may be
// judged either way.
func warnsBadCode(t turboImage, file []byte, pos int64) bool {
	if t.f.Restart > 0 {
		return true
	}
	scanEnd := int64(t.f.SegEnds[len(t.f.SegEnds)-1])
	left := scanEnd - (pos/8 - int64(t.scanOff)) + int64(len(file)-bytes.LastIndex(file, []byte{0xFF, 0xD9}))
	return left < 512*int64(t.rec.BPM)
}
