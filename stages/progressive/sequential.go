// Package progressive prepares progressive JPEGs for decodes that read less than all of
// them, with libjpeg-turbo's pixels: Trim leaves out the scans a decode at 1/8 does not use,
// for libjpeg-turbo itself, and Sequential rewrites a progressive JPEG as a sequential
// (baseline) one with the same DCT coefficients, as jpegtran does, so that a decoder of
// sequential JPEGs alone (the GPU's) gives the pixels libjpeg-turbo gives for the progressive
// file. Both read the frame header and the scans' progression the same way.
//
// libjpeg-turbo spends nearly all of a progressive decode in its entropy decoder (jdphuff.c),
// so its decode at 1/8 takes nearly as long as at full size
// (bench/results/2026-12-07-code-comments.md#stagesprogressive). The decoder
// here reads the scans into coefficients, and a sequential JPEG of those coefficients
// decodes to the same pixels as long as libjpeg-turbo does not smooth the progressive
// file's blocks, which it does only when some coefficients are not complete: Sequential
// takes only files whose scans send every coefficient of every component to its last bit.
//
// Like package jpegdec's parser, it takes a file only where it can vouch for the result:
// scans that libjpeg-turbo decodes without a warning. A code the table lacks, a coefficient
// past its band, an interval that needs more bits than it has or leaves a whole byte
// unread, a restart marker out of turn, a bogus progression, a table redefined after the
// first scan: any of these returns an error wrapping ErrUnsupported, and the caller decodes
// the file itself with libjpeg-turbo, which says what is wrong.
package progressive

import (
	"errors"
	"fmt"
	"sync"

	"github.com/imgpipe/imgpipe/stages/jpegturbo"
)

// ErrUnsupported is wrapped by Sequential's errors for files it does not rewrite.
var ErrUnsupported = errors.New("progressive: not a JPEG this package rewrites")

func unsupported(format string, a ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrUnsupported}, a...)...)
}

// component is one colour component of the frame, with its coefficients.
type component struct {
	id     byte
	h, v   int // sampling factors
	bw, bh int // blocks a row and column of coef: whole MCUs when the frame has several components
	cw, ch int // blocks a row and column in a scan of it alone
	// coef holds bw*bh blocks of the coefficients that libjpeg-turbo's inverse DCT at the
	// scale reads (keep), stride of them a block, in zigzag order: all 64 for an 8x8 IDCT,
	// 49 for 4x4, 25 for 2x2, the DC coefficient alone for 1x1. slot[k] is coefficient k's
	// place in a block, -1 when it is not kept.
	coef   []int16
	stride int
	keep   uint64
	slot   [64]int8
	needAC bool     // stride > 1: its AC scans are decoded
	nz     []uint64 // for each block when needAC: bit k is set when coefficient k (k >= 1) is nonzero, kept or not
	// bits is, for each coefficient in zigzag order, the bit position the scans so far
	// brought it to (libjpeg's coef_bits), -1 before any did.
	bits         [64]int8
	dcTab, acTab *decTable // the current scan's tables
	pred         int32     // the DC prediction
}

// frame is a progressive frame being read.
type frame struct {
	w, h         int
	hmax, vmax   int
	mcusX, mcusY int
	comps        []component
	restart      int // MCUs a restart interval, 0 for none
}

// huffSpec is one table of a DHT segment.
type huffSpec struct {
	set   bool
	built bool // tab is built from bits and vals
	bits  [17]uint8
	vals  [256]uint8
	tab   decTable
}

// rewriter holds one rewrite's state; pooled, with its buffers.
type rewriter struct {
	f    frame
	huff [2][4]huffSpec // [0 DC, 1 AC][table id]
	coef []int16
	nz   []uint64
	sd   scanDecoder
	// scanComps is the current scan's components (its backing array is reused).
	scanComps []*component
}

var rewriters = sync.Pool{New: func() any { return new(rewriter) }}

// Sequential appends to dst a sequential JPEG with the coefficients of data, a
// Huffman-coded progressive 8-bit JPEG of one or three components, such that libjpeg-turbo
// decodes it at scale 1/denom (as jpegturbo.DecodeScaled does) to the same pixels as data;
// it returns the grown dst. The coefficients that decode never reads are written as zeros
// (of a block whose inverse DCT is 1x1, 2x2 or 4x4 it reads 1, 25 or 49: idctReads), and
// scans of nothing else are passed over. The caller bounds the image size first: the
// coefficients take 2 bytes each, up to 6 a pixel of a 4:4:4 frame at full size.
//
// The segments before the first scan but DHT and DRI (APPn with JFIF, EXIF, Adobe and ICC
// data, COM, DQT) are copied as they are, in order; those after it are left out. The output has one scan
// coded with the standard Huffman tables of JPEG's Annex K, and no restart markers.
func Sequential(dst, data []byte, denom int) ([]byte, error) {
	rw := rewriters.Get().(*rewriter)
	defer rewriters.Put(rw)
	rw.f = frame{comps: rw.f.comps[:0]}
	for class := range rw.huff {
		for id := range rw.huff[class] {
			rw.huff[class][id].set, rw.huff[class][id].built = false, false
		}
	}
	n0 := len(dst)
	out, err := rw.rewrite(dst, data, denom)
	if err != nil {
		return dst[:n0], err
	}
	return out, nil
}

// rewrite walks data's segments, decoding the scans, then writes the sequential file.
func (rw *rewriter) rewrite(dst, data []byte, denom int) ([]byte, error) {
	if len(data) < 4 || data[0] != 0xff || data[1] != 0xd8 {
		return dst, unsupported("no SOI marker")
	}
	dst = append(dst, 0xff, 0xd8)
	f := &rw.f
	scans := 0
	p := 2
	for {
		if p+2 > len(data) || data[p] != 0xff {
			return dst, unsupported("no marker at byte %d", p)
		}
		for p+2 < len(data) && data[p+1] == 0xff {
			p++ // fill bytes
		}
		m := data[p+1]
		if m == 0xd9 { // EOI
			break
		}
		if m == 0x01 || m >= 0xd0 && m <= 0xd8 || p+4 > len(data) {
			return dst, unsupported("marker FF%02X at byte %d", m, p)
		}
		n := int(data[p+2])<<8 | int(data[p+3])
		if n < 2 || p+2+n > len(data) {
			return dst, unsupported("segment FF%02X runs past the data", m)
		}
		seg, whole := data[p+4:p+2+n], data[p:p+2+n]
		p += 2 + n
		var err error
		switch {
		case m >= 0xe0 && m <= 0xef || m == 0xfe: // APPn, COM
			if scans == 0 { // libjpeg reads JFIF and Adobe markers up to the first scan
				dst = append(dst, whole...)
			}
		case m == 0xdb: // DQT
			if scans > 0 {
				// libjpeg keeps the table each component had at its first scan
				return dst, unsupported("a quantisation table defined after the first scan")
			}
			dst = append(dst, whole...)
		case m == 0xc4: // DHT
			err = rw.readDHT(seg)
		case m == 0xdd: // DRI
			if len(seg) != 2 {
				return dst, unsupported("DRI segment of %d bytes", n)
			}
			f.restart = int(seg[0])<<8 | int(seg[1])
		case m == 0xc2: // SOF2
			if len(f.comps) > 0 {
				return dst, unsupported("a second frame header")
			}
			if err = f.read(seg, denom); err == nil {
				rw.alloc()
				dst = append(dst, 0xff, 0xc0) // the same frame, sequential
				dst = append(dst, whole[2:]...)
			}
		case m == 0xda: // SOS
			if len(f.comps) == 0 {
				return dst, unsupported("a scan before the frame header")
			}
			scans++
			p, err = rw.decodeScan(data, seg, p)
		default:
			return dst, unsupported("marker FF%02X", m)
		}
		if err != nil {
			return dst, err
		}
	}
	if scans == 0 {
		return dst, unsupported("no scan")
	}
	if i, k := f.incomplete(); i >= 0 {
		// libjpeg-turbo would smooth the blocks (jdcoefct.c), which a sequential file is not
		return dst, unsupported("component %d's coefficient %d is not complete", i, k)
	}
	return f.encode(dst)
}

// readDHT reads a DHT segment as jdmarker.c's get_dht does.
func (rw *rewriter) readDHT(b []byte) error {
	for len(b) > 0 {
		if len(b) < 17 {
			return unsupported("DHT segment shorter than its tables")
		}
		class, id := int(b[0]>>4), int(b[0]&15)
		if class > 1 || id > 3 {
			return unsupported("DHT table class/index %#02x", b[0])
		}
		s := &rw.huff[class][id]
		count := 0
		for l := 1; l <= 16; l++ {
			s.bits[l] = b[l]
			count += int(b[l])
		}
		if count > 256 || count > len(b)-17 {
			return unsupported("DHT table of %d symbols in %d bytes", count, len(b)-17)
		}
		copy(s.vals[:], b[17:17+count])
		s.set, s.built = true, false
		b = b[17+count:]
	}
	return nil
}

// table returns the decoding table of class (0 DC, 1 AC) and id, built the first time a
// scan uses it after its DHT.
func (rw *rewriter) table(class, id int) (*decTable, error) {
	if id > 3 {
		return nil, unsupported("Huffman table %d", id)
	}
	s := &rw.huff[class][id]
	if !s.set {
		return nil, unsupported("no %s Huffman table %d", [2]string{"DC", "AC"}[class], id)
	}
	if !s.built {
		var n int
		for _, c := range s.bits[1:] {
			n += int(c)
		}
		if !s.tab.build(&s.bits, s.vals[:n], class == 0) {
			return nil, unsupported("a Huffman table libjpeg refuses")
		}
		s.built = true
	}
	return &s.tab, nil
}

// incomplete returns a component and a coefficient (zigzag order) that the scans read so far
// have not sent to its last bit, or -1, -1 when every one is complete.
func (f *frame) incomplete() (comp, k int) {
	for i := range f.comps {
		for k, b := range f.comps[i].bits {
			if b != 0 {
				return i, k
			}
		}
	}
	return -1, -1
}

// read reads the frame header and lays out the coefficients for a decode at 1/denom.
func (f *frame) read(b []byte, denom int) error {
	if len(b) < 6 {
		return unsupported("SOF segment of %d bytes", len(b)+2)
	}
	prec, nc := int(b[0]), int(b[5])
	f.h, f.w = int(b[1])<<8|int(b[2]), int(b[3])<<8|int(b[4])
	switch {
	case prec != 8:
		return unsupported("%d-bit samples", prec)
	case f.w == 0 || f.h == 0:
		return unsupported("a %dx%d frame", f.w, f.h)
	case nc != 1 && nc != 3 || len(b) != 6+3*nc:
		return unsupported("%d components", nc)
	}
	f.hmax, f.vmax = 1, 1
	for i := range nc {
		c := b[6+3*i:]
		h, v := int(c[1]>>4), int(c[1]&15)
		if h < 1 || h > 4 || v < 1 || v > 4 {
			return unsupported("sampling factors %dx%d", h, v)
		}
		for _, o := range f.comps {
			if o.id == c[0] {
				return unsupported("component id %d twice", c[0])
			}
		}
		f.comps = append(f.comps, component{id: c[0], h: h, v: v})
		f.hmax, f.vmax = max(f.hmax, h), max(f.vmax, v)
	}
	f.mcusX, f.mcusY = ceilDiv(f.w, 8*f.hmax), ceilDiv(f.h, 8*f.vmax)
	applied, scaled := jpegturbo.AppliedDenom(f.w, f.h, denom)
	for i := range f.comps {
		c := &f.comps[i]
		c.cw, c.ch = ceilDiv(f.w*c.h, 8*f.hmax), ceilDiv(f.h*c.v, 8*f.vmax)
		c.bw, c.bh = f.mcusX*c.h, f.mcusY*c.v
		if nc == 1 {
			c.bw, c.bh = c.cw, c.ch // one component: no MCUs of several blocks
		}
		size := 8
		if scaled {
			size = jpegturbo.IDCTSize(f.hmax, f.vmax, c.h, c.v, applied)
		}
		c.keep = idctReads[size]
		c.stride, c.needAC = 0, size > 1
		for k := range c.slot {
			c.slot[k] = -1
			if c.keep&(1<<k) != 0 {
				c.slot[k] = int8(c.stride)
				c.stride++
			}
		}
		for k := range c.bits {
			c.bits[k] = -1
		}
	}
	return nil
}

// idctReads is, for each size of libjpeg-turbo's inverse DCT (1, 2, 4, 8), the zigzag
// positions of the coefficients it reads: jidctred.c's 4x4 skips row and column 4, its 2x2
// rows and columns 2, 4 and 6, and the 1x1 reads the DC coefficient alone.
var idctReads = func() map[int]uint64 {
	rows := map[int]uint8{1: 1, 2: 1<<0 | 1<<1 | 1<<3 | 1<<5 | 1<<7, 4: 0xff &^ (1 << 4), 8: 0xff}
	m := map[int]uint64{}
	for size, r := range rows {
		for k, n := range zigzag {
			if r&(1<<(n/8)) != 0 && r&(1<<(n%8)) != 0 {
				m[size] |= 1 << k
			}
		}
	}
	return m
}()

// zigzag is the natural (row-major) position of each coefficient in zigzag order.
var zigzag = [64]int{
	0, 1, 8, 16, 9, 2, 3, 10, 17, 24, 32, 25, 18, 11, 4, 5,
	12, 19, 26, 33, 40, 48, 41, 34, 27, 20, 13, 6, 7, 14, 21, 28,
	35, 42, 49, 56, 57, 50, 43, 36, 29, 22, 15, 23, 30, 37, 44, 51,
	58, 59, 52, 45, 38, 31, 39, 46, 53, 60, 61, 54, 47, 55, 62, 63,
}

// alloc gives the frame's components their coefficients, all zero.
func (rw *rewriter) alloc() {
	total, masks := 0, 0
	for _, c := range rw.f.comps {
		total += c.bw * c.bh * c.stride
		if c.needAC {
			masks += c.bw * c.bh
		}
	}
	rw.coef = grow(rw.coef, total)
	rw.nz = grow(rw.nz, masks)
	off, moff := 0, 0
	for i := range rw.f.comps {
		c := &rw.f.comps[i]
		n := c.bw * c.bh
		c.coef = rw.coef[off : off+n*c.stride : off+n*c.stride]
		off += n * c.stride
		if c.needAC {
			c.nz = rw.nz[moff : moff+n : moff+n]
			moff += n
		}
	}
}

// grow returns s with length n, all zero, reusing its array where it is large enough.
func grow[T int16 | uint64](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	s = s[:n]
	clear(s)
	return s
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }
