// Package npy reads and writes NumPy .npy files of float32 arrays: any
// shape, C order, little endian ('<f4'), format versions 1.0 to 3.0.
//
// Every header is checked before anything is allocated for the data: the
// magic, the version, the header's length (at most MaxHeaderBytes), the
// dictionary (exactly the keys descr, fortran_order and shape), the element
// type, the order, and the element count against the caller's limit. Bad
// input is an error that says what is wrong, never a panic.
package npy

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

// MaxHeaderBytes bounds a header's dictionary (NumPy's own reader refuses
// more than 10000 bytes by default).
const MaxHeaderBytes = 64 << 10

// MaxDims bounds the number of axes (NumPy's limit is 64).
const MaxDims = 64

// Align is what writers pad the header to, so the data starts aligned
// (numpy.lib.format uses 64 since NumPy 1.14).
const Align = 64

const magic = "\x93NUMPY"

// Array is a float32 array in C order: Data[i] is the element whose index,
// read as a number in the mixed radix Shape, is i.
type Array struct {
	Shape []int
	Data  []float32
}

// Elements returns the product of shape (1 for a 0-d array), or an error
// when an axis is negative or the product exceeds limit.
func Elements(shape []int, limit int64) (int64, error) {
	if len(shape) > MaxDims {
		return 0, fmt.Errorf("npy: %d axes, at most %d", len(shape), MaxDims)
	}
	n := int64(1)
	for i, d := range shape {
		if d < 0 {
			return 0, fmt.Errorf("npy: axis %d has negative length %d", i, d)
		}
		if d != 0 && n > limit/int64(d) {
			return 0, fmt.Errorf("npy: shape %v has more than %d elements", shape, limit)
		}
		n *= int64(d)
	}
	if n > limit {
		return 0, fmt.Errorf("npy: shape %v has more than %d elements", shape, limit)
	}
	return n, nil
}

// Header is a parsed .npy header dictionary.
type Header struct {
	Descr        string // the element type, as '<f4'
	FortranOrder bool
	Shape        []int
}

// ParseHeader parses a header dictionary such as
// "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }". It checks
// syntax only; Read checks that the array is one it can take.
func ParseHeader(s string) (Header, error) {
	p := &parser{s: strings.TrimRight(s, " \n")}
	h, err := p.dict()
	if err != nil {
		return Header{}, fmt.Errorf("npy: header %q: %w", clip(s), err)
	}
	return h, nil
}

func clip(s string) string {
	if len(s) > 200 {
		return s[:200] + "..."
	}
	return s
}

// parser reads the Python literal subset .npy headers use.
type parser struct {
	s string
	i int
}

func (p *parser) space() {
	for p.i < len(p.s) && (p.s[p.i] == ' ' || p.s[p.i] == '\t' || p.s[p.i] == '\n') {
		p.i++
	}
}

// eat skips spaces and c, reporting whether c was there.
func (p *parser) eat(c byte) bool {
	p.space()
	if p.i < len(p.s) && p.s[p.i] == c {
		p.i++
		return true
	}
	return false
}

func (p *parser) expect(c byte) error {
	if !p.eat(c) {
		return fmt.Errorf("want %q at offset %d", c, p.i)
	}
	return nil
}

func (p *parser) str() (string, error) {
	p.space()
	if p.i >= len(p.s) || (p.s[p.i] != '\'' && p.s[p.i] != '"') {
		return "", fmt.Errorf("want a string at offset %d", p.i)
	}
	q := p.s[p.i]
	end := strings.IndexByte(p.s[p.i+1:], q)
	if end < 0 {
		return "", fmt.Errorf("unterminated string at offset %d", p.i)
	}
	v := p.s[p.i+1 : p.i+1+end]
	p.i += end + 2
	return v, nil
}

func (p *parser) word() string {
	p.space()
	j := p.i
	for j < len(p.s) && (p.s[j] >= 'A' && p.s[j] <= 'Z' || p.s[j] >= 'a' && p.s[j] <= 'z' || p.s[j] >= '0' && p.s[j] <= '9') {
		j++
	}
	w := p.s[p.i:j]
	p.i = j
	return w
}

func (p *parser) dict() (Header, error) {
	var h Header
	if err := p.expect('{'); err != nil {
		return h, err
	}
	seen := map[string]bool{}
	for !p.eat('}') {
		key, err := p.str()
		if err != nil {
			return h, err
		}
		if seen[key] {
			return h, fmt.Errorf("key %q twice", key)
		}
		seen[key] = true
		if err := p.expect(':'); err != nil {
			return h, err
		}
		switch key {
		case "descr":
			h.Descr, err = p.str()
		case "fortran_order":
			switch w := p.word(); w {
			case "True", "False":
				h.FortranOrder = w == "True"
			default:
				err = fmt.Errorf("fortran_order %q: want True or False", w)
			}
		case "shape":
			h.Shape, err = p.shape()
		default:
			err = fmt.Errorf("unknown key %q", key)
		}
		if err != nil {
			return h, err
		}
		if !p.eat(',') {
			if err := p.expect('}'); err != nil {
				return h, err
			}
			break
		}
	}
	if p.space(); p.i != len(p.s) {
		return h, fmt.Errorf("text after the dictionary at offset %d", p.i)
	}
	for _, k := range []string{"descr", "fortran_order", "shape"} {
		if !seen[k] {
			return h, fmt.Errorf("no %q key", k)
		}
	}
	return h, nil
}

// shape reads a tuple of non-negative ints: (), (5,), (2, 3).
func (p *parser) shape() ([]int, error) {
	if err := p.expect('('); err != nil {
		return nil, err
	}
	shape := []int{}
	for !p.eat(')') {
		if len(shape) == MaxDims {
			return nil, fmt.Errorf("more than %d axes", MaxDims)
		}
		w := p.word()
		n, err := strconv.ParseInt(strings.TrimSuffix(w, "L"), 10, 64)
		if err != nil || n < 0 || n > math.MaxInt32 {
			return nil, fmt.Errorf("axis %d: %q is not a length from 0 to %d", len(shape), w, math.MaxInt32)
		}
		shape = append(shape, int(n))
		if !p.eat(',') {
			if err := p.expect(')'); err != nil {
				return nil, err
			}
			break
		}
	}
	return shape, nil
}

// Read reads a .npy float32 array of at most limit elements. The header is
// checked in full before the data is allocated; a file whose data is
// shorter than its shape says is an error.
func Read(r io.Reader, limit int64) (*Array, error) {
	br := bufio.NewReader(r)
	h, n, _, err := ReadHeader(br, limit)
	if err != nil {
		return nil, err
	}
	return ReadData(br, h, n)
}

// ReadHeader reads and checks a .npy header from r: an array of '<f4' in C
// order of at most limit elements. It returns the header, its element count
// and the header's length in bytes (where the data starts), having read
// nothing past the header, so that a caller who knows the file's size can
// check the data's size against it before anything is allocated.
func ReadHeader(r io.Reader, limit int64) (h Header, elements, dataOffset int64, err error) {
	h, dataOffset, err = readHeader(r)
	if err != nil {
		return Header{}, 0, 0, err
	}
	switch {
	case h.Descr != "<f4":
		return Header{}, 0, 0, fmt.Errorf("npy: element type %q: only little-endian float32 ('<f4') is supported", h.Descr)
	case h.FortranOrder:
		return Header{}, 0, 0, errors.New("npy: fortran_order is True: only C order is supported")
	}
	n, err := Elements(h.Shape, limit)
	if err != nil {
		return Header{}, 0, 0, err
	}
	return h, n, dataOffset, nil
}

// ReadData reads the n elements of data that follow header h (see
// ReadHeader): data shorter than that is an error.
func ReadData(r io.Reader, h Header, n int64) (*Array, error) {
	raw := make([]byte, 4*n)
	if _, err := io.ReadFull(r, raw); err != nil {
		return nil, fmt.Errorf("npy: data of shape %v (%d bytes): %w", h.Shape, len(raw), err)
	}
	return &Array{Shape: h.Shape, Data: Floats(raw)}, nil
}

// Floats returns the elements of '<f4' data: the little-endian float32s of b.
func Floats(b []byte) []float32 {
	x := make([]float32, len(b)/4)
	for i := range x {
		x[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return x
}

// PutFloats writes x into b as '<f4' data, little-endian float32s; b holds at least
// 4·len(x) bytes.
func PutFloats(b []byte, x []float32) {
	for i, v := range x {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
	}
}

// readHeader reads the magic, version, length and dictionary; off is where
// the data starts.
func readHeader(r io.Reader) (Header, int64, error) {
	var pre [8]byte
	if _, err := io.ReadFull(r, pre[:]); err != nil {
		return Header{}, 0, fmt.Errorf("npy: reading the magic: %w", err)
	}
	if string(pre[:6]) != magic {
		return Header{}, 0, errors.New("npy: not a .npy file (no \\x93NUMPY magic)")
	}
	var size, lenBytes int
	switch major := pre[6]; major {
	case 1:
		lenBytes = 2
		var b [2]byte
		if _, err := io.ReadFull(r, b[:]); err != nil {
			return Header{}, 0, fmt.Errorf("npy: reading the header length: %w", err)
		}
		size = int(binary.LittleEndian.Uint16(b[:]))
	case 2, 3:
		lenBytes = 4
		var b [4]byte
		if _, err := io.ReadFull(r, b[:]); err != nil {
			return Header{}, 0, fmt.Errorf("npy: reading the header length: %w", err)
		}
		size = int(binary.LittleEndian.Uint32(b[:]))
	default:
		return Header{}, 0, fmt.Errorf("npy: format version %d.%d: want 1.0, 2.0 or 3.0", pre[6], pre[7])
	}
	if size > MaxHeaderBytes {
		return Header{}, 0, fmt.Errorf("npy: header of %d bytes, at most %d", size, MaxHeaderBytes)
	}
	b := make([]byte, size)
	if _, err := io.ReadFull(r, b); err != nil {
		return Header{}, 0, fmt.Errorf("npy: reading the header: %w", err)
	}
	h, err := ParseHeader(string(b))
	return h, int64(len(pre) + lenBytes + size), err
}

// Write writes a as a .npy file, format version 1.0. The shape's product
// must equal len(a.Data).
func Write(w io.Writer, a *Array) error {
	n, err := Elements(a.Shape, math.MaxInt64)
	if err != nil {
		return err
	}
	if n != int64(len(a.Data)) {
		return fmt.Errorf("npy: shape %v has %d elements, data %d", a.Shape, n, len(a.Data))
	}
	bw := bufio.NewWriterSize(w, 64<<10)
	if err := WriteHeader(bw, Header{Descr: "<f4", Shape: a.Shape}); err != nil {
		return err
	}
	var chunk [16 << 10]byte
	for x := a.Data; len(x) > 0; {
		n := min(len(x), len(chunk)/4)
		PutFloats(chunk[:], x[:n])
		bw.Write(chunk[:4*n])
		x = x[n:]
	}
	return bw.Flush()
}

// WriteHeader writes the magic, version 1.0, the length and h's dictionary,
// padded with spaces and a newline so that the data starts at a multiple
// of 64 bytes.
func WriteHeader(w io.Writer, h Header) error {
	dims := make([]string, len(h.Shape))
	for i, d := range h.Shape {
		dims[i] = strconv.Itoa(d)
	}
	shape := "(" + strings.Join(dims, ", ")
	if len(dims) == 1 {
		shape += ","
	}
	order := "False"
	if h.FortranOrder {
		order = "True"
	}
	dict := fmt.Sprintf("{'descr': '%s', 'fortran_order': %s, 'shape': %s), }", h.Descr, order, shape)
	// magic (6) + version (2) + length (2) + dict + padding + '\n' is a multiple of Align.
	pad := (Align - (10+len(dict)+1)%Align) % Align
	header := dict + strings.Repeat(" ", pad) + "\n"
	if len(header) > math.MaxUint16 {
		return fmt.Errorf("npy: header of %d bytes does not fit format 1.0", len(header))
	}
	var pre [10]byte
	copy(pre[:], magic+"\x01\x00")
	binary.LittleEndian.PutUint16(pre[8:], uint16(len(header)))
	if _, err := w.Write(pre[:]); err != nil {
		return err
	}
	_, err := io.WriteString(w, header)
	return err
}
