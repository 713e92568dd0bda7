package jpegdec

import (
	"bytes"
	"errors"
	"fmt"
	"os/exec"
	"testing"
)

// The reference the tests hold Parse's output to: libjpeg's sequential Huffman decoding,
// transcribed, and djpeg's own DC-only decode.

// bitReader reads a restart segment's bits, most significant first, and zeros past its
// end as libjpeg does (pos then passes 8*len(b)).
type bitReader struct {
	b   []byte
	pos int
}

func (r *bitReader) bits(n int) int {
	v := 0
	for range n {
		bit := 0
		if i := r.pos >> 3; i < len(r.b) {
			bit = int(r.b[i]>>(7-r.pos&7)) & 1
		}
		v, r.pos = v<<1|bit, r.pos+1
	}
	return v
}

// decode reads one symbol bit by bit with MaxCode, ValOff and Values, as jdhuff.c's
// jpeg_huff_decode does, and checks that Lookup says the same of the next 9 bits.
func (r *bitReader) decode(t *Table) (int, error) {
	at := r.pos
	look := int(t.Lookup[r.bits(9)])
	r.pos = at
	code, l := r.bits(1), 1
	for ; l <= 16 && code > int(t.MaxCode[l]); l++ {
		code = code<<1 | r.bits(1)
	}
	if l > 16 {
		return 0, fmt.Errorf("bad Huffman code at bit %d", at)
	}
	sym := int(t.Values[(int(t.ValOff[l])+code)&255])
	if want := l<<8 | sym; look != want && (l <= 9 || look != 0) {
		return 0, fmt.Errorf("at bit %d Lookup gives %#x, the bit-by-bit decode %#x", at, look, want)
	}
	return sym, nil
}

func extend(v, s int) int {
	if v < 1<<(s-1) {
		return v - 1<<s + 1
	}
	return v
}

// refDecode decodes all of f's MCUs from scan (the bytes Parse appended) as jdhuff.c's
// decode_mcu_slow does, and returns the DC coefficient of each luma block, in a grid lw
// blocks wide. It fails on a bad code, and on a segment whose last MCU does not end within
// its last byte.
func refDecode(f *Frame, scan []byte) (dc []int, lw int, err error) {
	hl, vl := f.Comps[0].H, f.Comps[0].V
	lw = f.MCUsX * hl
	dc = make([]int, lw*f.MCUsY*vl)
	mcus, ri, start := f.MCUsX*f.MCUsY, f.Restart, 0
	if ri == 0 {
		ri = mcus
	}
	for s, end := range f.SegEnds {
		r := bitReader{b: scan[start:end]}
		var pred [3]int // each restart sets the DC predictors to 0
		for m := s * ri; m < min((s+1)*ri, mcus); m++ {
			for c, comp := range f.Comps {
				for b := range comp.H * comp.V {
					var blk [64]int
					n, err := r.decode(&f.Tables[comp.DC])
					if err != nil {
						return nil, 0, fmt.Errorf("MCU %d: %w", m, err)
					}
					if n > 0 {
						pred[c] += extend(r.bits(n), n)
					}
					blk[0] = pred[c]
					for k := 1; k < 64; k++ {
						rs, err := r.decode(&f.Tables[comp.AC])
						if err != nil {
							return nil, 0, fmt.Errorf("MCU %d: %w", m, err)
						}
						if run, size := rs>>4, rs&15; size != 0 {
							k += run
							blk[natural[min(k, 63)]] = extend(r.bits(size), size) // libjpeg's padded natural order
						} else if run == 15 {
							k += 15
						} else {
							break
						}
					}
					if c == 0 {
						dc[(m/f.MCUsX*vl+b/hl)*lw+m%f.MCUsX*hl+b%hl] = blk[0]
					}
				}
			}
		}
		if r.pos > 8*len(r.b) || r.pos <= 8*(len(r.b)-1) {
			return nil, 0, fmt.Errorf("segment %d of %d bytes ends at bit %d", s, len(r.b), r.pos)
		}
		start = end
	}
	return dc, lw, nil
}

// compareDjpeg checks dc against libjpeg-turbo: at scale 1/8 each luma block is one pixel,
// the DC term through jidctred.c's jpeg_idct_1x1 and the post-IDCT range limit.
func compareDjpeg(t *testing.T, data []byte, f *Frame, dc []int, lw int, warns bool) {
	if _, err := exec.LookPath("djpeg"); err != nil {
		t.Skip("djpeg is not on PATH")
	}
	cmd := exec.Command("djpeg", "-scale", "1/8", "-grayscale", "-pnm")
	cmd.Stdin = bytes.NewReader(data)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var exit *exec.ExitError
	switch {
	case warns && err == nil:
		t.Error("djpeg gave no warning")
	case warns && errors.As(err, &exit) && exit.ExitCode() == 2: // EXIT_WARNING
	case err != nil:
		t.Fatalf("djpeg: %v: %s", err, stderr.Bytes())
	}
	var w, h, maxval int
	n, err := fmt.Sscanf(string(out), "P5\n%d %d\n%d\n", &w, &h, &maxval)
	if n != 3 || maxval != 255 {
		t.Fatalf("djpeg wrote no 8-bit PGM (%v): %.20q", err, out)
	}
	pix := out[len(out)-w*h:]
	if w != (f.Width+7)/8 || h != (f.Height+7)/8 {
		t.Fatalf("djpeg's 1/8 image is %dx%d for %dx%d", w, h, f.Width, f.Height)
	}
	q := int(f.Comps[0].Quant[0])
	bad := 0
	for y := range h {
		for x := range w {
			v := (dc[y*lw+x]*q + 4) >> 3 & 1023
			switch {
			case v < 128:
				v += 128
			case v < 512:
				v = 255
			case v < 896:
				v = 0
			default:
				v -= 896
			}
			if got := int(pix[y*w+x]); got != v && bad < 5 {
				t.Errorf("pixel (%d,%d): djpeg %d, DC %d", x, y, got, v)
				bad++
			}
		}
	}
}
