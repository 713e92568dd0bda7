package jpegdec

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
)

// ErrUnsupported is wrapped by Parse's errors for files outside what the CUDA decoder reproduces.
var ErrUnsupported = errors.New("jpegdec: not a JPEG the CUDA decoder takes")

// Table is one Huffman table as the kernels read it.
type Table struct {
	Lookup  [512]uint16 // for each 9-bit prefix of the stream: length<<8 | symbol of the code it starts with, when that code has <= 9 bits; 0 otherwise
	MaxCode [18]int32   // MaxCode[l], l = 1..16: the largest code of length l, -1 when there is none; MaxCode[0] = -1, MaxCode[17] = 0x7fffffff (sentinel)
	ValOff  [18]int32   // ValOff[l]: index in Values of the first code of length l, minus that code (so Values[ValOff[l]+code]); 0 when there is none
	Values  [256]uint8  // the table's symbols in code order (zero-filled after the last)
}

// Component is one colour component of the scan.
type Component struct {
	H, V   int        // sampling factors (1..4); 1,1 for a single-component file
	DC, AC int        // indexes into Frame.Tables of its DC and AC Huffman tables
	Quant  [64]uint16 // its quantisation table in natural (row-major) order, as libjpeg stores quantval
}

// Frame is a baseline JPEG ready for the CUDA decoder.
type Frame struct {
	Width, Height int
	Comps         []Component // 1 (grayscale) or 3 (YCbCr)
	HMax, VMax    int         // largest sampling factors (1, 1 for grayscale)
	MCUsX, MCUsY  int         // the scan's MCU grid: ceil(W/(8*HMax)) x ceil(H/(8*VMax)); grayscale (non-interleaved): ceil(W/8) x ceil(H/8)
	Restart       int         // MCUs per restart interval (DRI); 0 when there is none
	Tables        []Table     // the Huffman tables the components use (each distinct (class,id) that is used, once)
	SegEnds       []int       // end offset, in the unstuffed scan bytes Parse appended, of each restart segment (one segment without DRI)
}

// Parse checks data, a whole JPEG file, and appends its entropy-coded data to dst with the byte stuffing removed
// and the restart markers cut out (segment i is [SegEnds[i-1], SegEnds[i]) of the appended part, SegEnds[-1] = 0).
// It returns the frame and the grown dst.
//
// On error the returned slice has dst's length again (its capacity may have grown, so a
// caller that pools the buffer keeps it). dst grows at most once, by less than len(data).
func Parse(data []byte, dst []byte) (*Frame, []byte, error) {
	var h header
	p, err := h.read(data)
	if err != nil {
		return nil, dst, err
	}
	s, err := h.frame()
	if err != nil {
		return nil, dst, err
	}
	n0 := len(dst)
	dst = slices.Grow(dst, len(data)-p)
	dst, err = s.f.unstuff(data, p, dst, h.segments)
	if err != nil {
		return nil, dst[:n0], err
	}
	return &s.f, dst, nil
}

// Marker codes (the byte after 0xFF), named as in jdmarker.c.
const (
	mSOF0  = 0xC0
	mSOF1  = 0xC1
	mSOF2  = 0xC2
	mDHT   = 0xC4
	mSOF9  = 0xC9
	mSOF10 = 0xCA
	mDAC   = 0xCC
	mSOF15 = 0xCF
	mRST0  = 0xD0
	mRST7  = 0xD7
	mSOI   = 0xD8
	mEOI   = 0xD9
	mSOS   = 0xDA
	mDQT   = 0xDB
	mDNL   = 0xDC
	mDRI   = 0xDD
	mAPP0  = 0xE0
	mAPP14 = 0xEE
	mAPP15 = 0xEF
	mCOM   = 0xFE
	mTEM   = 0x01
)

// maxDim is libjpeg's JPEG_MAX_DIMENSION: jdinput.c refuses larger images, though the
// SOF's 16-bit fields could say up to 65535.
const maxDim = 65500

// natural is libjpeg's jpeg_natural_order: the row-major index of each zigzag position.
var natural = [64]uint8{
	0, 1, 8, 16, 9, 2, 3, 10,
	17, 24, 32, 25, 18, 11, 4, 5,
	12, 19, 26, 33, 40, 48, 41, 34,
	27, 20, 13, 6, 7, 14, 21, 28,
	35, 42, 49, 56, 57, 50, 43, 36,
	29, 22, 15, 23, 30, 37, 44, 51,
	58, 59, 52, 45, 38, 31, 39, 46,
	53, 60, 61, 54, 47, 55, 62, 63,
}

func unsupported(format string, a ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrUnsupported}, a...)...)
}

func truncated(where string) error { return unsupported("the file ends %s", where) }

// huffSpec is one table of a DHT segment, as libjpeg's JHUFF_TBL keeps it.
type huffSpec struct {
	set  bool
	bits [17]uint8 // bits[l]: the number of codes of length l (bits[0] unused)
	vals [256]uint8
}

// sofComp is one component of the frame header and the scan's table choices for it.
type sofComp struct {
	id, h, v, tq int
	td, ta       int // the scan's DC and AC table ids
}

// header is what the markers up to the scan say, kept as libjpeg keeps it: a table
// redefined before SOS is the one the scan uses.
type header struct {
	sof           bool
	width, height int
	ncomp         int
	comps         [3]sofComp
	restart       int
	quant         [4][64]uint16
	quantSet      [4]bool
	huff          [2][4]huffSpec // [0 DC, 1 AC][table id]
	jfif, adobe   bool
	transform     byte
	segments      int // restart segments the scan must have
}

// nextMarker finds the marker at or after d[p] as jdmarker.c's next_marker does: it
// skips stray bytes and 0xFF 0x00 pairs (libjpeg warns "extraneous bytes before marker",
// which the project counts as harmless) and fill 0xFF bytes. It returns the marker code
// and the offset after it.
func nextMarker(d []byte, p int) (byte, int, error) {
	for {
		i := bytes.IndexByte(d[p:], 0xFF)
		if i < 0 {
			return 0, 0, truncated("before the next marker")
		}
		p += i + 1
		for p < len(d) && d[p] == 0xFF {
			p++
		}
		if p == len(d) {
			return 0, 0, truncated("inside a marker")
		}
		if c := d[p]; c != 0 {
			return c, p + 1, nil
		}
		p++
	}
}

// read walks the markers from SOI through the SOS header as jdmarker.c's read_markers does
// and returns the offset of the scan's entropy-coded data.
func (h *header) read(d []byte) (int, error) {
	if len(d) < 2 || d[0] != 0xFF || d[1] != mSOI {
		return 0, unsupported("no SOI marker at the start")
	}
	p := 2
	for {
		m, q, err := nextMarker(d, p)
		if err != nil {
			return 0, err
		}
		p = q
		switch {
		case m >= mRST0 && m <= mRST7, m == mTEM:
			continue // parameterless; read_markers passes over them
		case m == mSOI:
			return 0, unsupported("a second SOI marker")
		case m == mEOI:
			return 0, unsupported("EOI before any scan")
		case m == mSOF2:
			return 0, unsupported("progressive (SOF2)")
		case m == mSOF9 || m == mSOF10:
			return 0, unsupported("arithmetic coding (SOF%d)", m-mSOF0)
		case m == mDAC:
			return 0, unsupported("arithmetic conditioning (DAC)")
		case m > mSOF2 && m <= mSOF15 && m != mDHT:
			return 0, unsupported("lossless or hierarchical JPEG (SOF%d)", m-mSOF0)
		case m < mSOF0 || m == 0xDE || m == 0xDF || m >= 0xF0 && m < mCOM:
			return 0, unsupported("unknown marker FF%02X", m) // JERR_UNKNOWN_MARKER
		}
		if p+2 > len(d) {
			return 0, truncated(fmt.Sprintf("in the length of marker FF%02X", m))
		}
		n := int(d[p])<<8 | int(d[p+1])
		skip := m >= mAPP0 && m <= mAPP15 || m == mCOM || m == mDNL
		if n < 2 && !skip {
			return 0, unsupported("marker FF%02X has length %d", m, n)
		}
		end := p + max(n, 2) // skip_variable steps over just the length of a length below 2
		if end > len(d) {
			return 0, truncated(fmt.Sprintf("inside marker FF%02X's segment", m))
		}
		b := d[p+2 : end]
		p = end
		switch m {
		case mSOF0, mSOF1:
			err = h.readSOF(b)
		case mDHT:
			err = h.readDHT(b)
		case mDQT:
			err = h.readDQT(b)
		case mDRI:
			if len(b) != 2 {
				return 0, unsupported("DRI has length %d, not 4", n)
			}
			h.restart = int(b[0])<<8 | int(b[1])
		case mAPP0:
			// examine_app0: JFIF needs 14 bytes of data; its version only draws a warning
			if len(b) >= 14 && string(b[:5]) == "JFIF\x00" {
				h.jfif = true
			}
		case mAPP14:
			if len(b) >= 12 && string(b[:5]) == "Adobe" {
				h.adobe, h.transform = true, b[11]
			}
		case mSOS:
			return p, h.readSOS(b)
		}
		if err != nil {
			return 0, err
		}
	}
}

// readSOF reads a SOF0 or SOF1 segment, with jdmarker.c's get_sof checks and those that
// jdinput.c's initial_setup and turbojpeg.c's getSubsamp make of it later.
func (h *header) readSOF(b []byte) error {
	if h.sof {
		return unsupported("a second frame header (SOF)")
	}
	if len(b) < 6 {
		return unsupported("SOF segment of %d bytes", len(b)+2)
	}
	prec, nc := int(b[0]), int(b[5])
	h.height, h.width = int(b[1])<<8|int(b[2]), int(b[3])<<8|int(b[4])
	switch {
	case h.height == 0:
		return unsupported("height 0 (to come in a DNL marker)")
	case h.width == 0 || nc == 0:
		return unsupported("empty image (width %d, %d components)", h.width, nc)
	case len(b) != 6+3*nc:
		return unsupported("SOF segment of %d bytes for %d components", len(b)+2, nc)
	case prec != 8:
		return unsupported("%d-bit samples", prec)
	case h.width > maxDim || h.height > maxDim:
		return unsupported("%dx%d is over libjpeg's %d", h.width, h.height, maxDim)
	case nc != 1 && nc != 3:
		return unsupported("%d components", nc)
	}
	h.sof, h.ncomp = true, nc
	for i := range nc {
		c := b[6+3*i:]
		sc := &h.comps[i]
		sc.id, sc.h, sc.v, sc.tq = int(c[0]), int(c[1]>>4), int(c[1]&15), int(c[2])
		if sc.h < 1 || sc.h > 4 || sc.v < 1 || sc.v > 4 {
			return unsupported("sampling factors %dx%d", sc.h, sc.v)
		}
	}
	if nc == 1 {
		return nil // getSubsamp: a grayscale file's factors mean nothing
	}
	y, cb, cr := h.comps[0], h.comps[1], h.comps[2]
	chroma1x1 := cb.h == 1 && cb.v == 1 && cr.h == 1 && cr.v == 1
	switch {
	case chroma1x1 && (y.h == 1 && y.v == 1 || y.h == 2 && y.v == 1 || y.h == 2 && y.v == 2 ||
		y.h == 1 && y.v == 2 || y.h == 4 && y.v == 1):
		return nil
	default:
		return unsupported("sampling %dx%d,%dx%d,%dx%d (only 4:4:4, 4:2:2, 4:2:0, 4:4:0, 4:1:1 with 1x1 chroma)",
			y.h, y.v, cb.h, cb.v, cr.h, cr.v)
	}
}

// readDQT reads a DQT segment as get_dqt does: any nonzero precision nibble means 16-bit
// values, and the tables must fill the segment exactly.
func (h *header) readDQT(b []byte) error {
	for len(b) > 0 {
		wide, id := b[0]>>4 != 0, int(b[0]&15)
		if id >= 4 {
			return unsupported("DQT table %d", id)
		}
		size := 64
		if wide {
			size = 128
		}
		if len(b) < 1+size {
			return unsupported("DQT segment shorter than its tables")
		}
		q := &h.quant[id]
		for i := range 64 {
			if wide {
				q[natural[i]] = uint16(b[1+2*i])<<8 | uint16(b[2+2*i])
			} else {
				q[natural[i]] = uint16(b[1+i])
			}
		}
		h.quantSet[id] = true
		b = b[1+size:]
	}
	return nil
}

// readDHT reads a DHT segment with get_dht's checks; jpeg_make_d_derived_tbl checks the
// tables the scan uses later (build).
func (h *header) readDHT(b []byte) error {
	for len(b) > 16 {
		tc0 := b[0]
		tc := int(tc0)
		var s huffSpec
		count := 0
		for l := 1; l <= 16; l++ {
			s.bits[l] = b[l]
			count += int(b[l])
		}
		b = b[17:]
		if count > 256 || count > len(b) {
			return unsupported("DHT table of %d symbols in %d bytes", count, len(b))
		}
		class := 0
		if tc&0x10 != 0 {
			class, tc = 1, tc-0x10
		}
		if tc >= 4 {
			return unsupported("DHT table class/index %#02x", tc0)
		}
		copy(s.vals[:], b[:count])
		s.set = true
		h.huff[class][tc] = s
		b = b[count:]
	}
	if len(b) != 0 {
		return unsupported("DHT segment has %d bytes left over", len(b))
	}
	return nil
}

// readSOS reads the SOS header: one interleaved scan of every component in frame order,
// sequential (jdhuff.c only warns about other Ss, Se, Ah/Al; the project treats that
// warning as an error).
func (h *header) readSOS(b []byte) error {
	if !h.sof {
		return unsupported("SOS before SOF")
	}
	if len(b) < 1 || len(b) != 2*int(b[0])+4 || b[0] < 1 || b[0] > 4 {
		return unsupported("SOS segment of %d bytes", len(b)+2)
	}
	ns := int(b[0])
	if ns != h.ncomp {
		return unsupported("a scan of %d of the %d components", ns, h.ncomp)
	}
	for i := range ns {
		// get_sos gives scan slot i the first frame component from i on with its id, so
		// the scan is in frame order exactly when the ids pair up
		c := &h.comps[i]
		if int(b[1+2*i]) != c.id {
			return unsupported("scan components not in frame order")
		}
		c.td, c.ta = int(b[2+2*i]>>4), int(b[2+2*i]&15)
	}
	if ss, se, a := b[1+2*ns], b[2+2*ns], b[3+2*ns]; ss != 0 || se != 63 || a != 0 {
		return unsupported("scan Ss=%d Se=%d Ah/Al=%#02x (not sequential)", ss, se, a)
	}
	return nil
}

// store holds a Frame and what its slices point to, in one allocation.
type store struct {
	f     Frame
	comps [3]Component
	tabs  [6]Table
	seg   [1]int
}

// frame checks what libjpeg checks once the scan starts (colour space, quantisation and
// Huffman tables) and lays out the Frame.
func (h *header) frame() (*store, error) {
	if h.ncomp == 3 {
		// jdapimin.c's default_decompress_parms: JFIF, then Adobe's transform, then the ids
		rgb := h.adobe && h.transform == 0
		if !h.adobe {
			rgb = h.comps[0].id == 'R' && h.comps[1].id == 'G' && h.comps[2].id == 'B'
		}
		if rgb && !h.jfif {
			return nil, unsupported("RGB colour space")
		}
	}
	s := new(store)
	f := &s.f
	f.Width, f.Height, f.Restart = h.width, h.height, h.restart
	f.Comps = s.comps[:h.ncomp]
	f.Tables = s.tabs[:0]
	var slot [2][4]int // 1 + the index in f.Tables of each table in use
	for i := range f.Comps {
		sc, c := &h.comps[i], &f.Comps[i]
		if sc.tq >= 4 || !h.quantSet[sc.tq] {
			return nil, unsupported("no quantisation table %d", sc.tq)
		}
		c.Quant = h.quant[sc.tq]
		c.H, c.V = sc.h, sc.v
		if h.ncomp == 1 {
			c.H, c.V = 1, 1
		}
		for class, id := range [2]int{sc.td, sc.ta} {
			if id >= 4 || !h.huff[class][id].set {
				if id < 2 {
					// jinit_huff_decoder would put in the standard table (Motion-JPEG)
					return nil, unsupported("no %s Huffman table %d (libjpeg-turbo would use the standard one)", className[class], id)
				}
				return nil, unsupported("no %s Huffman table %d", className[class], id)
			}
			if slot[class][id] == 0 {
				k := len(f.Tables)
				f.Tables = f.Tables[:k+1]
				if err := f.Tables[k].build(&h.huff[class][id], class == 0); err != nil {
					return nil, err
				}
				slot[class][id] = k + 1
			}
			if class == 0 {
				c.DC = slot[class][id] - 1
			} else {
				c.AC = slot[class][id] - 1
			}
		}
		f.HMax, f.VMax = max(f.HMax, c.H), max(f.VMax, c.V)
	}
	f.MCUsX = (f.Width + 8*f.HMax - 1) / (8 * f.HMax)
	f.MCUsY = (f.Height + 8*f.VMax - 1) / (8 * f.VMax)
	h.segments = 1
	if f.Restart > 0 {
		h.segments = (f.MCUsX*f.MCUsY + f.Restart - 1) / f.Restart
	}
	f.SegEnds = s.seg[:0]
	return s, nil
}

var className = [2]string{"DC", "AC"}

// build makes t from a DHT table as jpeg_make_d_derived_tbl does, refusing what it
// refuses, and a table with no codes, with which nothing decodes.
func (t *Table) build(s *huffSpec, dc bool) error {
	var codes [256]int32 // the canonical code of each symbol (JPEG Annex C)
	n, code := 0, int32(0)
	for l := 1; l <= 16; l++ {
		c := int(s.bits[l])
		if n+c > 256 {
			return unsupported("Huffman table of over 256 codes")
		}
		for range c {
			codes[n] = code
			n++
			code++
		}
		// the next code must still fit in l bits: no code is all ones
		if code >= 1<<l {
			return unsupported("Huffman code lengths overfill the code space")
		}
		code <<= 1
	}
	if n == 0 {
		return unsupported("Huffman table without codes")
	}
	if dc {
		for _, v := range s.vals[:n] {
			if v > 15 {
				return unsupported("DC Huffman symbol %d", v)
			}
		}
	}
	t.MaxCode[0], t.MaxCode[17] = -1, 0x7fffffff
	p := 0
	for l := 1; l <= 16; l++ {
		c := int(s.bits[l])
		if c == 0 {
			t.MaxCode[l] = -1
			continue
		}
		t.ValOff[l] = int32(p) - codes[p]
		for i := p; i < p+c && l <= 9; i++ {
			e := uint16(l)<<8 | uint16(s.vals[i])
			lo := int(codes[i]) << (9 - l)
			for k := lo; k < lo+1<<(9-l); k++ {
				t.Lookup[k] = e
			}
		}
		p += c
		t.MaxCode[l] = codes[p-1]
	}
	t.Values = s.vals
	return nil
}

// unstuff appends the entropy-coded data at d[p:] to dst, reading it as jdhuff.c's
// jpeg_fill_bit_buffer does: 0xFF, any further 0xFFs, then 0x00 is one 0xFF byte; 0xFFs
// then RSTn end a restart segment; 0xFFs then anything else end the scan. The restart
// markers must run RST0, RST1, ... in turn and number segments-1, and the scan must end
// in EOI; libjpeg would resynchronise, or go on past other markers, where the CUDA
// decoder does not.
func (f *Frame) unstuff(d []byte, p int, dst []byte, segments int) ([]byte, error) {
	if 2*(segments-1) > len(d)-p {
		return dst, unsupported("DRI %d asks for %d restart markers, more than fit in the scan", f.Restart, segments-1)
	}
	if segments > 1 {
		f.SegEnds = make([]int, 0, segments)
	}
	base, prev, next := len(dst), 0, 0
	for {
		i := bytes.IndexByte(d[p:], 0xFF)
		if i < 0 {
			return dst, truncated("inside the scan")
		}
		dst = append(dst, d[p:p+i]...)
		p += i + 1
		for p < len(d) && d[p] == 0xFF {
			p++
		}
		if p == len(d) {
			return dst, truncated("inside a marker in the scan")
		}
		c := d[p]
		p++
		switch {
		case c == 0:
			dst = append(dst, 0xFF)
			continue
		case c == mEOI:
		case c < mRST0 || c > mRST7:
			return dst, unsupported("marker FF%02X after the scan, where only EOI is taken", c)
		case f.Restart == 0:
			return dst, unsupported("restart marker RST%d without DRI", c-mRST0)
		case int(c-mRST0) != next:
			return dst, unsupported("RST%d where RST%d belongs", c-mRST0, next)
		case len(f.SegEnds)+1 >= segments:
			return dst, unsupported("more than %d restart intervals", segments)
		}
		end := len(dst) - base
		if end == prev {
			// no MCU fits in no bytes: libjpeg would pad with zeros and warn
			return dst, unsupported("restart segment %d is empty", len(f.SegEnds))
		}
		f.SegEnds = append(f.SegEnds, end)
		prev, next = end, (next+1)&7
		if c == mEOI {
			if len(f.SegEnds) != segments {
				return dst, unsupported("%d restart intervals, where DRI %d asks for %d", len(f.SegEnds), f.Restart, segments)
			}
			return dst, nil
		}
	}
}
