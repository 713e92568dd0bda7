package stages

import (
	"math/bits"
	"slices"

	"github.com/imgpipe/imgpipe/stages/jpegmarker"
	"github.com/imgpipe/imgpipe/stages/jpegturbo"
)

// A progressive JPEG sends each component's coefficients in several scans: its DC
// coefficients first, then bands of AC coefficients, often refined bit by bit later. When
// libjpeg-turbo decodes it at 1/8 size, the blocks of a component whose inverse DCT has size 1
// (every component of a 4:4:4 or 4:2:2 photo, the luma of a 4:2:0 one: jpegturbo.IDCTSize)
// become one sample from their DC coefficient alone, so most of the file, its AC scans, is
// decoded for nothing (81% of the bytes of 52 progressive photos, 61% of their decode time at
// 1/8). trimProgressive leaves such scans out, and libjpeg-turbo gives the same bytes from the
// rest:
//
//   - every DC scan is kept, so every DC coefficient is exact;
//   - a component whose inverse DCT is larger keeps all its scans;
//   - a component of size 1 keeps its first AC scan that covers some of coefficients 1 to 9
//     (in zigzag order), when the file has one. libjpeg-turbo smooths the blocks of a
//     progressive JPEG whose AC coefficients are not all known (jdcoefct.c, block smoothing):
//     it estimates missing AC coefficients, which a size-1 inverse DCT does not read, and
//     it changes DC coefficients only of a component for which none of coefficients 1 to 9
//     arrived. That first scan keeps that condition as the whole file has it. What it sends
//     does not matter, so where it can, trimProgressive puts a scan of a few bytes in its
//     place (zeroACScan).
//
// A file whose scans libjpeg-turbo would refuse, or warn of as a bogus progression, is left
// whole. The dropped scans are not read at all, so damage inside them goes unnoticed, where
// libjpeg-turbo, reading the whole file, would warn of corrupt data.

// trimProgressive returns a Huffman-coded progressive 8-bit JPEG without the scans that
// libjpeg-turbo's decode of it at scale 1/denom (the scale DecodeScaled applies) does not use,
// or data itself when nothing can be left out, the file is not such a JPEG, or its
// structure is unusual in any way (the decoder then reads it whole and says what is wrong).
func trimProgressive(data []byte, denom int) []byte {
	var comps []trimComponent
	var out []byte // from the frame header on; what precedes it is kept as it is
	usual, dropped := true, false
	slot, restart := -2, 0 // slot: the zero scans' Huffman table, -2 until looked for
	eoi := jpegmarker.Segments(data, func(m byte, seg []byte, at, end int) bool {
		switch {
		case jpegmarker.IsSOF(m):
			if m != 0xc2 || comps != nil {
				usual = false
				return false
			}
			if comps = trimComponents(seg, denom); comps == nil {
				usual = false
				return false
			}
			out = append(make([]byte, 0, len(data)), data[:at]...)
		case m == 0xdd && len(seg) >= 2: // DRI
			restart = int(seg[0])<<8 | int(seg[1])
		case m == 0xda: // SOS: the scan's header, then its entropy-coded data
			if comps == nil || len(seg) < 1 || len(seg) != 4+2*int(seg[0]) {
				usual = false
				return false
			}
			ns := int(seg[0])
			ss, se, ah, al := int(seg[1+2*ns]), int(seg[2+2*ns]), int(seg[3+2*ns]>>4), int(seg[3+2*ns]&15)
			if !progression(comps, seg[1:1+2*ns], ss, se, ah, al) {
				usual = false // libjpeg-turbo would refuse the scan or warn of a bogus progression
				return false
			}
			if ss == 0 {
				break // a DC scan
			}
			// An AC scan, of one component (progression checked it).
			switch comp := &comps[slices.IndexFunc(comps, func(c trimComponent) bool { return c.id == seg[1] })]; {
			case comp.size > 1:
			case !comp.acKept && ah == 0 && ss <= 9:
				comp.acKept = true
				if slot == -2 {
					slot = freeACTable(data)
				}
				if slot < 0 || restart != 0 {
					break
				}
				if zero := zeroACScan(comp, slot); len(zero) < end-at {
					out = append(out, zero...)
					dropped = true
					return true
				}
			default:
				dropped = true
				return true
			}
		}
		if out != nil {
			out = append(out, data[at:end]...)
		}
		return true
	})
	if !eoi || !usual || !dropped {
		return data // nothing to leave out, or a file for the decoder to read whole
	}
	return append(out, 0xff, 0xd9)
}

// freeACTable returns an AC Huffman table slot (0 to 3) that no AC scan of a progressive JPEG
// uses, or -1.
func freeACTable(data []byte) int {
	var used [4]bool
	jpegmarker.Segments(data, func(m byte, seg []byte, _, _ int) bool {
		if m == 0xda && len(seg) >= 1 && len(seg) == 4+2*int(seg[0]) && seg[1+2*int(seg[0])] > 0 {
			for k := range int(seg[0]) {
				used[seg[2+2*k]&3] = true
			}
		}
		return true
	})
	return slices.Index(used[:], false)
}

// zeroACScan is a first AC scan, with the Huffman table it needs (in slot), that sends
// coefficient 1 of every block of comp as 0 at successive approximation 13: EOB runs only,
// a few bytes. It stands in for comp's first AC scan when comp's blocks become one sample:
// libjpeg-turbo then knows some of coefficients 1 to 9 as it did (see trimProgressive), and
// decodes almost nothing. Without a restart interval only: EOB runs stop at restart markers.
func zeroACScan(comp *trimComponent, slot int) []byte {
	// The table: the 15 EOB run symbols r<<4 (runs of 2^r to 2^(r+1)-1 blocks), each a
	// 4-bit code, r itself.
	b := []byte{0xff, 0xc4, 0, 2 + 1 + 16 + 15, 0x10 | byte(slot)}
	b = append(b, 0, 0, 0, 15, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
	for r := range 15 {
		b = append(b, byte(r<<4))
	}
	b = append(b, 0xff, 0xda, 0, 8, 1, comp.id, byte(slot), 1, 1, 13) // Ss 1, Se 1, Ah 0, Al 13
	var acc uint64
	var n uint
	put := func(v uint64, bits uint) {
		acc, n = acc<<bits|v, n+bits
		for n >= 8 {
			n -= 8
			c := byte(acc >> n)
			if b = append(b, c); c == 0xff {
				b = append(b, 0) // stuffing
			}
		}
	}
	for left := comp.blocks; left > 0; {
		run := min(left, 1<<15-1)
		r := uint(bits.Len(uint(run)) - 1)
		put(uint64(r), 4)
		put(uint64(run-1<<r), r)
		left -= run
	}
	if n > 0 {
		put(1<<(8-n)-1, 8-n) // pad with 1 bits
	}
	return b
}

// trimComponent is a component of the frame trimProgressive trims.
type trimComponent struct {
	id     byte
	size   int  // its inverse DCT's
	blocks int  // in a scan of it alone
	acKept bool // its first AC scan is in the output
	// bits is, for each coefficient in zigzag order, the bit position the scans so far
	// brought it to (libjpeg's coef_bits), -1 before any did.
	bits [64]int8
}

// progression checks a scan of spectral band ss..se and successive approximation ah, al over
// the components whose selectors are every other byte of sel, as libjpeg-turbo does
// (jdphuff.c), and records it: false for a scan it refuses or that warns of a bogus
// progression (a refinement that does not follow the bits sent, AC before DC, a component
// twice or unknown).
func progression(comps []trimComponent, sel []byte, ss, se, ah, al int) bool {
	ns := len(sel) / 2
	switch {
	case ss == 0 && se != 0, ss > se, se > 63, ss > 0 && ns != 1,
		ah != 0 && al != ah-1, al > 13:
		return false
	}
	for k := 0; k < ns; k++ {
		c := slices.IndexFunc(comps, func(c trimComponent) bool { return c.id == sel[2*k] })
		if c < 0 {
			return false
		}
		for j := range k {
			if sel[2*j] == sel[2*k] {
				return false
			}
		}
		bits := &comps[c].bits
		if ss > 0 && bits[0] < 0 {
			return false
		}
		for i := ss; i <= se; i++ {
			if max(int(bits[i]), 0) != ah {
				return false
			}
			bits[i] = int8(al)
		}
	}
	return true
}

// trimComponents reads an 8-bit frame header (SOF segment seg) into its components with the
// size of their inverse DCT at the scale at which libjpeg-turbo decodes the frame for denom;
// nil when the header is not one libjpeg-turbo would decode so.
func trimComponents(seg []byte, denom int) []trimComponent {
	if len(seg) < 6 || seg[0] != 8 || seg[5] == 0 || len(seg) != 6+3*int(seg[5]) {
		return nil
	}
	h, w := int(seg[1])<<8|int(seg[2]), int(seg[3])<<8|int(seg[4])
	applied, ok := jpegturbo.AppliedDenom(w, h, denom)
	if !ok {
		return nil
	}
	factors := seg[6:]
	hmax, vmax := 1, 1
	for c := 0; c < len(factors); c += 3 {
		fh, fv := int(factors[c+1]>>4), int(factors[c+1]&15)
		if fh == 0 || fv == 0 {
			return nil
		}
		hmax, vmax = max(hmax, fh), max(vmax, fv)
	}
	comps := make([]trimComponent, 0, len(factors)/3)
	for c := 0; c < len(factors); c += 3 {
		fh, fv := int(factors[c+1]>>4), int(factors[c+1]&15)
		tc := trimComponent{id: factors[c], size: jpegturbo.IDCTSize(hmax, vmax, fh, fv, applied),
			blocks: ceilDiv(w*fh, 8*hmax) * ceilDiv(h*fv, 8*vmax)}
		for i := range tc.bits {
			tc.bits[i] = -1
		}
		comps = append(comps, tc)
	}
	return comps
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }
