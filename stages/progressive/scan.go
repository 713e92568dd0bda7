package progressive

import (
	"bytes"
	"math/bits"

	"github.com/imgpipe/imgpipe/stages/jpegmarker"
)

// scan is one scan's header: the components it codes, in its order, and its spectral band
// and successive approximation.
type scan struct {
	comps          []*component
	ss, se, ah, al int
}

// scanDecoder decodes one scan's entropy-coded data into the frame's coefficients, as
// jdphuff.c does for data that is intact; any departure from that (a code the table lacks,
// a coefficient past the band, bits missing or left over in an interval) makes it stop and
// return false, and the caller leaves the file to libjpeg-turbo.
type scanDecoder struct {
	f      *frame
	s      *scan
	data   []byte // the scan's unstuffed intervals, each followed by 8 zero bytes
	ends   []int  // the end of each interval's own bytes in data (its padding follows)
	r      bitReader
	next   int   // the interval to read next
	left   int   // MCUs left in the current interval; -1 without restarts
	eobrun int32 // blocks left in the current end-of-band run
}

// unstuff reads the scan's entropy-coded data at src[p:] as jdhuff.c's bit reader does
// (0xFF 0x00 is a 0xFF byte, RSTn ends a restart interval) into d.data. The restart markers
// must number intervals-1 and run RST0, RST1, ... in turn. It returns the offset of the
// marker that ends the scan, or -1 where the data does not end as it should (fill bytes
// inside the data, which libjpeg skips, are not taken either).
func (d *scanDecoder) unstuff(src []byte, p, intervals int) int {
	d.data, d.ends = d.data[:0], d.ends[:0]
	for {
		i := bytes.IndexByte(src[p:], 0xff)
		if i < 0 || p+i+1 >= len(src) {
			return -1
		}
		d.data = append(d.data, src[p:p+i]...)
		p += i
		m := src[p+1]
		switch {
		case m == 0:
			d.data = append(d.data, 0xff)
			p += 2
			continue
		case m == 0xff:
			return -1
		case m >= 0xd0 && m <= 0xd7: // RSTn
			if int(m-0xd0) != len(d.ends)&7 || len(d.ends)+1 >= intervals {
				return -1
			}
			p += 2
		case len(d.ends)+1 != intervals:
			return -1 // the scan ends before its last interval
		}
		d.ends = append(d.ends, len(d.data))
		d.data = append(d.data, 0, 0, 0, 0, 0, 0, 0, 0)
		if len(d.ends) == intervals {
			return p
		}
	}
}

// startMCU counts an MCU off the current restart interval, moving to the next interval
// where one starts (nextInterval). It is false when the interval before was not read exactly.
func (d *scanDecoder) startMCU() bool {
	switch {
	case d.left > 0:
		d.left--
		return true
	case d.left < 0: // no restarts: one interval
		return true
	}
	return d.nextInterval()
}

// nextInterval starts the next restart interval, resetting what a restart resets
// (jdphuff.c's process_restart): the DC predictions and the end-of-band run.
func (d *scanDecoder) nextInterval() bool {
	if d.next > 0 && !d.r.exact() {
		return false
	}
	start := 0
	if d.next > 0 {
		start = d.ends[d.next-1] + 8
	}
	d.r.reset(d.data[start:d.ends[d.next]+8], d.ends[d.next]-start)
	d.next++
	for _, c := range d.s.comps {
		c.pred = 0
	}
	d.eobrun = 0
	d.left = d.f.restart - 1
	if d.f.restart == 0 {
		d.left = -1
	}
	return true
}

// done reports whether the last interval was read exactly.
func (d *scanDecoder) done() bool { return d.r.exact() }

// decodeDC decodes a DC scan, of one component or of several interleaved in MCUs.
func (d *scanDecoder) decodeDC() bool {
	f, s := d.f, d.s
	if len(s.comps) == 1 {
		c := s.comps[0]
		for by := range c.ch {
			off := by * c.bw * c.stride
			for range c.cw {
				if !d.startMCU() || !d.dcBlock(c, &c.coef[off]) {
					return false
				}
				off += c.stride
			}
		}
		return d.done()
	}
	for my := range f.mcusY {
		for mx := range f.mcusX {
			if !d.startMCU() {
				return false
			}
			for _, c := range s.comps {
				for v := range c.v {
					off := ((my*c.v+v)*c.bw + mx*c.h) * c.stride
					for range c.h {
						if !d.dcBlock(c, &c.coef[off]) {
							return false
						}
						off += c.stride
					}
				}
			}
		}
	}
	return d.done()
}

// dcBlock decodes one block's DC coefficient, or refines it by a bit.
func (d *scanDecoder) dcBlock(c *component, dc *int16) bool {
	if d.s.ah != 0 {
		if d.r.bit() {
			*dc |= 1 << d.s.al
		}
		return true
	}
	s, ok := d.r.decode(c.dcTab)
	if !ok {
		return false
	}
	var diff int32
	if s != 0 {
		diff = extend(d.r.bits(uint(s)), uint(s))
	}
	if c.pred += diff; c.pred < -1<<15 || c.pred >= 1<<15 {
		return false // no 8-bit JPEG has such a DC coefficient (libjpeg: overflow is an error)
	}
	*dc = int16(uint32(c.pred) << d.s.al) // (JCOEF) LEFT_SHIFT(s, Al)
	return true
}

// decodeAC decodes an AC scan, which codes one component.
func (d *scanDecoder) decodeAC() bool {
	c := d.s.comps[0]
	for by := range c.ch {
		for b := by * c.bw; b < by*c.bw+c.cw; b++ {
			if !d.startMCU() {
				return false
			}
			var ok bool
			if d.s.ah == 0 {
				ok = d.acFirst(c, b)
			} else {
				ok = d.acRefine(c, b)
			}
			if !ok {
				return false
			}
		}
	}
	return d.done()
}

// acFirst decodes the band of block b in a first AC scan (decode_mcu_AC_first).
func (d *scanDecoder) acFirst(c *component, b int) bool {
	if d.eobrun > 0 {
		d.eobrun--
		return true
	}
	r, t, al, se := &d.r, c.acTab, d.s.al, d.s.se
	blk := c.coef[b*c.stride : (b+1)*c.stride]
	nz := c.nz[b]
	for k := d.s.ss; k <= se; k++ {
		rs, ok := r.decode(t)
		if !ok {
			return false
		}
		run, s := rs>>4, uint(rs&15)
		if s != 0 {
			if k += run; k > se {
				return false // libjpeg would write past the band
			}
			// (JCOEF) LEFT_SHIFT(s, Al): an int16 as libjpeg's, even where it overflows
			if v := int16(uint32(extend(r.bits(s), s)) << al); v != 0 {
				if m := c.slot[k]; m >= 0 {
					blk[m] = v
				}
				nz |= 1 << k
			}
			continue
		}
		if run == 15 { // ZRL: 16 zeros
			k += 15
			continue
		}
		d.eobrun = 1<<run - 1 // this block ends the first of them
		if run > 0 {
			d.eobrun += r.bits(uint(run))
		}
		break
	}
	c.nz[b] = nz
	return true
}

// acRefine refines the band of block b by a bit in an AC scan after the first
// (decode_mcu_AC_refine): a correction bit for each coefficient already nonzero, in order,
// and the coefficients that become nonzero, as ±1 at the bit. The block's nonzero mask
// finds the coefficients in question without visiting the zero ones.
func (d *scanDecoder) acRefine(c *component, b int) bool {
	r, se := &d.r, d.s.se
	p1 := int16(1) << d.s.al
	blk := c.coef[b*c.stride : (b+1)*c.stride]
	nz := c.nz[b]
	band := ^uint64(0) << d.s.ss &^ (^uint64(0) << se << 1)
	k := d.s.ss
	if d.eobrun == 0 {
		for ; k <= se; k++ {
			rs, ok := r.decode(c.acTab)
			if !ok {
				return false
			}
			run, s := rs>>4, rs&15
			var v int16
			switch {
			case s == 1:
				v = -p1
				if r.bit() {
					v = p1
				}
			case s != 0:
				return false // libjpeg warns: a refinement codes a new coefficient as ±1
			case run != 15:
				d.eobrun = 1 << run
				if run > 0 {
					d.eobrun += r.bits(uint(run))
				}
			}
			if d.eobrun > 0 {
				break
			}
			// The next zero coefficient after run zero ones is the new one's place (the
			// band's end, past ZRL's 16 or a bad run); the nonzero ones before it get their
			// correction bits.
			from := ^uint64(0) << k
			zeros := ^nz & band & from
			for ; run > 0 && zeros != 0; run-- {
				zeros &= zeros - 1
			}
			next := se + 1
			if zeros != 0 {
				next = bits.TrailingZeros64(zeros)
			}
			if mask := nz & band & from &^ (^uint64(0) << next); mask != 0 {
				correct(r, c, blk, mask, p1)
			}
			k = next
			if v != 0 {
				if k > se {
					return false // libjpeg would write past the band
				}
				if m := c.slot[k]; m >= 0 {
					blk[m] = v
				}
				nz |= 1 << k
			}
		}
	}
	if d.eobrun > 0 {
		// The rest of the band, from the end of band on, has correction bits only.
		if mask := nz & band & (^uint64(0) << k); mask != 0 {
			correct(r, c, blk, mask, p1)
		}
		d.eobrun--
	}
	c.nz[b] = nz
	return true
}

// correct reads a correction bit for each coefficient in mask (all nonzero), in order: a 1
// adds the bit p1 to its magnitude (unless it is there already, which a progression that
// passed the checks never has), kept in blk when c keeps it.
func correct(r *bitReader, c *component, blk []int16, mask uint64, p1 int16) {
	n := uint(bits.OnesCount64(mask))
	if n > 56 {
		// more bits than one fill holds: two goes
		half := mask
		for range 32 {
			half &= half - 1
		}
		correct(r, c, blk, mask&^half, p1)
		correct(r, c, blk, half, p1)
		return
	}
	if r.n < n {
		r.fill()
	}
	got := r.acc // the bits, from the top
	r.acc <<= n
	r.n -= n
	for ; mask != 0; mask &= mask - 1 {
		if int64(got) < 0 {
			if m := c.slot[bits.TrailingZeros64(mask)]; m >= 0 && blk[m]&p1 == 0 {
				sign := blk[m] >> 15 // 0 or -1
				blk[m] += p1 ^ sign - sign
			}
		}
		got <<= 1
	}
}

// readScan reads the SOS segment seg into s (its components in the scan's order) and checks
// the scan against the progression so far as jdphuff.c does, recording it in the components'
// bits: what libjpeg-turbo refuses, or warns of as a bogus progression, is an error, as is a
// first scan of coefficients already sent.
func (f *frame) readScan(seg []byte, s *scan) error {
	if len(seg) < 1 || len(seg) != 4+2*int(seg[0]) || seg[0] == 0 || seg[0] > 4 {
		return unsupported("an SOS segment of %d bytes", len(seg)+2)
	}
	ns := int(seg[0])
	*s = scan{comps: s.comps[:0], ss: int(seg[1+2*ns]), se: int(seg[2+2*ns]),
		ah: int(seg[3+2*ns] >> 4), al: int(seg[3+2*ns] & 15)}
	switch {
	case s.ss == 0 && s.se != 0, s.ss > s.se, s.se > 63, s.ss > 0 && ns != 1,
		s.ah != 0 && s.al != s.ah-1, s.al > 13:
		return unsupported("a scan of band %d-%d, bits %d to %d, of %d components", s.ss, s.se, s.ah, s.al, ns)
	}
	blocks := 0
	for k := range ns {
		id := seg[1+2*k]
		ci := -1
		for i := range f.comps {
			if f.comps[i].id == id {
				ci = i
			}
		}
		if ci < 0 {
			return unsupported("a scan of component id %d, which the frame lacks", id)
		}
		c := &f.comps[ci]
		for _, o := range s.comps {
			if o == c {
				return unsupported("a scan of component id %d twice", id)
			}
		}
		if s.ss > 0 && c.bits[0] < 0 {
			return unsupported("an AC scan of component %d before its DC", ci)
		}
		for i := s.ss; i <= s.se; i++ {
			// libjpeg warns of a bogus progression when a refinement does not follow the bits
			// sent; a first scan of coefficients already sent is not taken either.
			if b := int(c.bits[i]); s.ah == 0 && b != -1 || s.ah != 0 && b != s.ah {
				return unsupported("a bogus progression: coefficient %d of component %d", i, ci)
			}
			c.bits[i] = int8(s.al)
		}
		blocks += c.h * c.v
		s.comps = append(s.comps, c)
	}
	if ns > 1 && blocks > 10 {
		return unsupported("an MCU of %d blocks", blocks) // libjpeg's limit
	}
	return nil
}

// decodeScan reads the SOS segment seg (readScan) and its tables, and decodes its
// entropy-coded data at data[p:] when the decode at the scale reads what it codes (else
// passes over it). It returns the offset of the marker after the scan.
func (rw *rewriter) decodeScan(data, seg []byte, p int) (int, error) {
	f := &rw.f
	s := scan{comps: rw.scanComps}
	err := f.readScan(seg, &s)
	rw.scanComps = s.comps
	if err != nil {
		return 0, err
	}
	for k, c := range s.comps {
		tabs := seg[2+2*k]
		switch {
		case s.ss == 0 && s.ah == 0:
			c.dcTab, err = rw.table(0, int(tabs>>4))
		case s.ss > 0:
			c.acTab, err = rw.table(1, int(tabs&15))
		}
		if err != nil {
			return 0, err
		}
	}
	ns := len(s.comps)
	if s.ss > 0 && !s.comps[0].needAC {
		return jpegmarker.SkipEntropy(data, p), nil
	}
	mcus := f.mcusX * f.mcusY
	if ns == 1 {
		mcus = s.comps[0].cw * s.comps[0].ch
	}
	intervals := 1
	if f.restart > 0 {
		intervals = ceilDiv(mcus, f.restart)
	}
	d := &rw.sd
	d.f, d.s, d.next, d.left = f, &s, 0, 0
	end := d.unstuff(data, p, intervals)
	if end < 0 {
		return 0, unsupported("scan data that does not end as it should")
	}
	ok := false
	if s.ss == 0 {
		ok = d.decodeDC()
	} else {
		ok = d.decodeAC()
	}
	if !ok {
		return 0, unsupported("scan data that libjpeg-turbo would not decode without a warning")
	}
	return end, nil
}
