package progressive

import (
	"math/bits"
	"slices"

	"github.com/imgpipe/imgpipe/stages/jpegmarker"
)

// A progressive JPEG sends each component's coefficients in several scans: its DC
// coefficients first, then bands of AC coefficients, often refined bit by bit later. When
// libjpeg-turbo decodes it at 1/8 size, the blocks of a component whose inverse DCT has size 1
// (every component of a 4:4:4 or 4:2:2 photo, the luma of a 4:2:0 one: jpegturbo.IDCTSize)
// become one sample from their DC coefficient alone, so most of the file, its AC scans, is
// decoded for nothing (81% of the bytes of 52 progressive photos, 61% of their decode time at
// 1/8). Trim leaves such scans out, and libjpeg-turbo gives the same bytes from the
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
//     does not matter, so where it can, Trim puts a scan of a few bytes in its
//     place (zeroACScan).
//
// A file whose scans libjpeg-turbo would refuse, or warn of as a bogus progression, is left
// whole, as is one whose frame or scan headers Sequential does not take (a frame of other
// than 1 or 3 components, a first scan of coefficients already sent), and one whose scans
// leave some coefficient short of its last bit: libjpeg-turbo smooths the blocks of such a
// file by what every scan sent, DC coefficients included. The dropped scans are not read at
// all, so damage inside them goes unnoticed, where libjpeg-turbo, reading the whole file,
// would warn of corrupt data.

// Trim returns a Huffman-coded progressive 8-bit JPEG without the scans that libjpeg-turbo's
// decode of it at scale 1/denom (the scale jpegturbo.DecodeScaled applies) does not use, or
// data itself when nothing can be left out, the file is not such a JPEG, or its structure is
// unusual in any way (the decoder then reads it whole and says what is wrong). Its frame
// header and scans are read as Sequential reads them (frame.read, frame.readScan).
func Trim(data []byte, denom int) []byte {
	var f frame
	var s scan
	var acKept []bool // for each component: its first AC scan covering some of 1-9 is in the output
	var out []byte    // from the frame header on; what precedes it is kept as it is
	usual, dropped := true, false
	slot, restart := -2, 0 // slot: the zero scans' Huffman table, -2 until looked for
	eoi := jpegmarker.Segments(data, func(m byte, seg []byte, at, end int) bool {
		switch {
		case jpegmarker.IsSOF(m):
			if m != 0xc2 || len(f.comps) > 0 || f.read(seg, denom) != nil {
				usual = false
				return false
			}
			acKept = make([]bool, len(f.comps))
			out = append(make([]byte, 0, len(data)), data[:at]...)
		case m == 0xdd && len(seg) >= 2: // DRI
			restart = int(seg[0])<<8 | int(seg[1])
		case m == 0xda: // SOS: the scan's header, then its entropy-coded data
			if len(f.comps) == 0 || f.readScan(seg, &s) != nil {
				usual = false // libjpeg-turbo would refuse the scan or warn of a bogus progression
				return false
			}
			if s.ss == 0 {
				break // a DC scan
			}
			// An AC scan, of one component (readScan checked it).
			c := s.comps[0]
			i := slices.IndexFunc(f.comps, func(o component) bool { return o.id == c.id })
			switch {
			case c.needAC:
			case !acKept[i] && s.ah == 0 && s.ss <= 9:
				acKept[i] = true
				if slot == -2 {
					slot = freeACTable(data)
				}
				if slot < 0 || restart != 0 {
					break
				}
				if zero := zeroACScan(c.id, c.cw*c.ch, slot); len(zero) < end-at {
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
	if i, _ := f.incomplete(); !eoi || !usual || !dropped || i >= 0 {
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
// coefficient 1 of every block of component id (blocks of them) as 0 at successive approximation 13: EOB runs only,
// a few bytes. It stands in for that component's first AC scan when its blocks become one sample:
// libjpeg-turbo then knows some of coefficients 1 to 9 as it did (see Trim), and
// decodes almost nothing. Without a restart interval only: EOB runs stop at restart markers.
func zeroACScan(id byte, blocks, slot int) []byte {
	// The table: the 15 EOB run symbols r<<4 (runs of 2^r to 2^(r+1)-1 blocks), each a
	// 4-bit code, r itself.
	b := []byte{0xff, 0xc4, 0, 2 + 1 + 16 + 15, 0x10 | byte(slot)}
	b = append(b, 0, 0, 0, 15, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
	for r := range 15 {
		b = append(b, byte(r<<4))
	}
	b = append(b, 0xff, 0xda, 0, 8, 1, id, byte(slot), 1, 1, 13) // Ss 1, Se 1, Ah 0, Al 13
	w := bitWriter{buf: b}
	for left := blocks; left > 0; {
		run := min(left, 1<<15-1)
		r := uint(bits.Len(uint(run)) - 1)
		w.put(uint32(r), 4)
		w.put(uint32(run-1<<r), r)
		left -= run
	}
	w.flush()
	return w.buf
}
