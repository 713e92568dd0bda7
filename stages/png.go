package stages

import (
	"compress/flate"
	"compress/zlib"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"sync"

	"github.com/imgpipe/imgpipe/stages/pngfast"
)

// Two PNG writers. The default, PNGFast, is imgpipe's own fully specified
// encoding (package pngfast, docs/png-fast.md): the CPU and the GPU write the
// same bytes. The zlib levels go through a direct PNG writer rather than
// image/png: image/png has no RGB image type (C = 3 would need a 4-byte RGBA
// copy of every image) and it tries all five row filters on every row even at
// its fastest level. The format is the plain subset: 8-bit gray or RGB, no
// interlace, no ancillary chunks. Tests decode the output with image/png.

// pngIDATSize is the payload size of each IDAT chunk of the zlib writer.
const pngIDATSize = 64 << 10

// PNG row filter types.
const (
	ftNone = iota
	ftSub
	ftUp
	ftAverage
	ftPaeth
	nFilters
)

// zlibPools holds one pool of zlib writers per flate level 0..9: a writer
// owns about a megabyte of tables, too much to allocate per image.
var zlibPools [10]sync.Pool

// pngRows is the per-call row memory, pooled for the same reason.
type pngRows struct {
	prev []byte           // the previous raw row (zero before the first)
	out  [nFilters][]byte // filter byte + filtered row, per filter type
}

var pngRowPool = sync.Pool{New: func() any { return new(pngRows) }}

// PNGFastBound is the most bytes EncodePNGFast writes for an image of shape
// s (pngfast.Bound); a device encoder sizes its output with it too.
func PNGFastBound(s Shape) int { return pngfast.Bound(s.W, s.H, s.C) }

// EncodePNGFast writes m as a PNGFast file into dst, which must hold
// PNGFastBound(m's shape) bytes, and returns the file's length. Like the
// pixel stages it panics on an invalid image: callers check images first.
func EncodePNGFast(dst []byte, m *Image) int {
	mustValid("EncodePNGFast", "source", m)
	return pngfast.Encode(dst, m.Pix, m.W, m.H, m.C, m.Stride)
}

// fastBufs recycles the whole-file buffers of encodePNGFast.
var fastBufs sync.Pool

func encodePNGFast(w io.Writer, m *Image) error {
	if err := pngfast.Check(m.W, m.H, m.C); err != nil {
		return err
	}
	var buf []byte
	if p, ok := fastBufs.Get().(*[]byte); ok {
		buf = *p
	}
	buf = grow(buf, PNGFastBound(m.Shape()))
	defer func() { fastBufs.Put(&buf) }()
	_, err := w.Write(buf[:EncodePNGFast(buf, m)])
	return err
}

func encodePNG(w io.Writer, m *Image, compression int) error {
	if compression == PNGFast {
		return encodePNGFast(w, m)
	}
	if m.W > math.MaxInt32 || m.H > math.MaxInt32 {
		return fmt.Errorf("image is %dx%d, over PNG's limit", m.W, m.H)
	}
	level, adaptive := flate.BestSpeed, false
	switch {
	case compression == PNGNoCompression:
		level = flate.NoCompression
	case compression >= 2:
		// A size-oriented level: pick the filter per row like libpng does.
		level, adaptive = compression, true
	}
	return writePNG(w, m, level, adaptive)
}

// writePNG writes m with flate level level, filtering every row with Sub,
// or with the best filter per row when adaptive (level NoCompression always
// uses None).
func writePNG(w io.Writer, m *Image, level int, adaptive bool) error {
	pw := &pngWriter{w: w}
	pw.write([]byte("\x89PNG\r\n\x1a\n"))
	var ihdr [13]byte
	binary.BigEndian.PutUint32(ihdr[0:], uint32(m.W))
	binary.BigEndian.PutUint32(ihdr[4:], uint32(m.H))
	ihdr[8] = 8 // bit depth
	if m.C == 3 {
		ihdr[9] = 2 // colour type RGB
	} // else 0: gray; compression, filter and interlace methods are 0
	pw.chunk("IHDR", ihdr[:])

	idat := &idatWriter{pw: pw}
	zw, _ := zlibPools[level].Get().(*zlib.Writer)
	if zw == nil {
		var err error
		if zw, err = zlib.NewWriterLevel(idat, level); err != nil {
			return err
		}
	} else {
		zw.Reset(idat)
	}
	defer zlibPools[level].Put(zw)

	rows := pngRowPool.Get().(*pngRows)
	defer pngRowPool.Put(rows)
	n := m.W * m.C
	rows.prev = grow(rows.prev, n)
	clear(rows.prev)
	for f := range rows.out {
		rows.out[f] = grow(rows.out[f], n+1)
		rows.out[f][0] = byte(f)
	}
	for y := 0; y < m.H && pw.err == nil; y++ {
		cur := m.Row(y)
		var line []byte
		switch {
		case level == flate.NoCompression:
			line = rows.out[ftNone]
			copy(line[1:], cur)
		case adaptive:
			line = filterAdaptive(&rows.out, cur, rows.prev, m.C)
		default:
			line = rows.out[ftSub]
			filterSub(line[1:], cur, m.C)
		}
		if _, err := zw.Write(line); err != nil {
			return err
		}
		if adaptive {
			copy(rows.prev, cur)
		}
	}
	if err := zw.Close(); err != nil {
		return err
	}
	idat.flush()
	pw.chunk("IEND", nil)
	return pw.err
}

// filterSub writes the Sub filter of cur (bpp bytes per pixel) into out.
func filterSub(out, cur []byte, bpp int) {
	out = out[:len(cur)]
	copy(out[:bpp], cur[:bpp])
	for i := bpp; i < len(cur); i++ {
		out[i] = cur[i] - cur[i-bpp]
	}
}

// filterAdaptive applies every filter and returns the line (filter byte and
// data) whose bytes, read as signed, have the smallest absolute sum: the
// heuristic libpng and image/png use.
func filterAdaptive(out *[nFilters][]byte, cur, prev []byte, bpp int) []byte {
	n := len(cur)
	none, sub, up, avg, pae := out[ftNone][1:n+1], out[ftSub][1:n+1], out[ftUp][1:n+1], out[ftAverage][1:n+1], out[ftPaeth][1:n+1]
	prev = prev[:n]
	copy(none, cur)
	for i := 0; i < n; i++ {
		var a, c byte
		if i >= bpp {
			a, c = cur[i-bpp], prev[i-bpp]
		}
		b := prev[i]
		sub[i] = cur[i] - a
		up[i] = cur[i] - b
		avg[i] = cur[i] - byte((int(a)+int(b))/2)
		pae[i] = cur[i] - paeth(a, b, c)
	}
	best, bestSum := 0, math.MaxInt
	for f := range out {
		sum := 0
		for _, v := range out[f][1 : n+1] {
			sum += absSigned(v)
		}
		if sum < bestSum {
			best, bestSum = f, sum
		}
	}
	return out[best][:n+1]
}

// paeth is the PNG Paeth predictor of a (left), b (up) and c (up-left).
func paeth(a, b, c byte) byte {
	p := int(a) + int(b) - int(c)
	pa, pb, pc := abs(p-int(a)), abs(p-int(b)), abs(p-int(c))
	switch {
	case pa <= pb && pa <= pc:
		return a
	case pb <= pc:
		return b
	}
	return c
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

func absSigned(v byte) int { return abs(int(int8(v))) }

// pngWriter writes PNG chunks and keeps the first write error.
type pngWriter struct {
	w   io.Writer
	err error
}

func (p *pngWriter) write(b []byte) {
	if p.err == nil {
		_, p.err = p.w.Write(b)
	}
}

// chunk writes length, type, data and the CRC of type and data.
func (p *pngWriter) chunk(typ string, data []byte) {
	var hdr [8]byte
	binary.BigEndian.PutUint32(hdr[:4], uint32(len(data)))
	copy(hdr[4:], typ)
	crc := crc32.Update(crc32.ChecksumIEEE(hdr[4:]), crc32.IEEETable, data)
	var tail [4]byte
	binary.BigEndian.PutUint32(tail[:], crc)
	p.write(hdr[:])
	p.write(data)
	p.write(tail[:])
}

// idatWriter cuts the zlib stream into IDAT chunks of pngIDATSize bytes.
type idatWriter struct {
	pw  *pngWriter
	buf [pngIDATSize]byte
	n   int
}

func (d *idatWriter) Write(b []byte) (int, error) {
	total := len(b)
	for len(b) > 0 {
		k := copy(d.buf[d.n:], b)
		d.n += k
		b = b[k:]
		if d.n == len(d.buf) {
			d.flush()
		}
	}
	if d.pw.err != nil {
		return 0, d.pw.err
	}
	return total, nil
}

func (d *idatWriter) flush() {
	if d.n > 0 {
		d.pw.chunk("IDAT", d.buf[:d.n])
		d.n = 0
	}
}
