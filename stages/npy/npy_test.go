package npy

import (
	"bytes"
	"encoding/binary"
	"math"
	"runtime"
	"strings"
	"testing"
)

func TestRoundTrip(t *testing.T) {
	for _, shape := range [][]int{{}, {0}, {1}, {7}, {3, 1, 5}, {2, 0, 4}, {1, 1, 1, 1, 3}, {4096}, {3, 4099}} {
		n, _ := Elements(shape, math.MaxInt64)
		a := &Array{Shape: shape, Data: make([]float32, n)}
		for i := range a.Data {
			a.Data[i] = float32(i)*0.37 - 1
		}
		if n > 2 {
			a.Data[1], a.Data[2] = float32(math.Inf(-1)), math.Float32frombits(0x7fc00001) // a NaN payload survives
		}
		var buf bytes.Buffer
		if err := Write(&buf, a); err != nil {
			t.Fatal(err)
		}
		if (buf.Len()-4*int(n))%Align != 0 {
			t.Errorf("%v: data starts at %d, not a multiple of %d", shape, buf.Len()-4*int(n), Align)
		}
		b, err := Read(&buf, 1<<20)
		if err != nil {
			t.Fatalf("%v: %v", shape, err)
		}
		if len(b.Shape) != len(shape) || len(b.Data) != len(a.Data) {
			t.Fatalf("%v: read back %v with %d elements", shape, b.Shape, len(b.Data))
		}
		for i := range shape {
			if b.Shape[i] != shape[i] {
				t.Errorf("%v: shape read back as %v", shape, b.Shape)
			}
		}
		for i := range a.Data {
			if math.Float32bits(a.Data[i]) != math.Float32bits(b.Data[i]) {
				t.Errorf("%v: element %d = %v, want %v", shape, i, b.Data[i], a.Data[i])
			}
		}
	}
}

// file builds a .npy file from a version, a dictionary and data bytes.
func file(major byte, dict string, data []byte) []byte {
	b := []byte(magic)
	b = append(b, major, 0)
	if major == 1 {
		b = binary.LittleEndian.AppendUint16(b, uint16(len(dict)))
	} else {
		b = binary.LittleEndian.AppendUint32(b, uint32(len(dict)))
	}
	return append(append(b, dict...), data...)
}

func TestRead(t *testing.T) {
	f32 := func(v ...float32) []byte {
		var b []byte
		for _, x := range v {
			b = binary.LittleEndian.AppendUint32(b, math.Float32bits(x))
		}
		return b
	}
	ok := "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }   \n"
	tests := []struct {
		name  string
		in    []byte
		limit int64
		want  string // error text; "" for success
	}{
		{"numpy 1.0", file(1, ok, f32(1.5, -2)), 10, ""},
		{"numpy 2.0", file(2, ok, f32(1.5, -2)), 10, ""},
		{"numpy 3.0, double quotes", file(3, `{"descr": "<f4", "fortran_order": False, "shape": (2,)}`, f32(1.5, -2)), 10, ""},
		{"empty", nil, 10, "reading the magic"},
		{"no magic", []byte("PNG\x00\x00\x00\x00\x00\x00\x00"), 10, "not a .npy file"},
		{"version 4", file(4, ok, nil), 10, "format version 4.0"},
		{"header cut", file(1, ok, nil)[:20], 10, "reading the header"},
		{"header too long", file(2, strings.Repeat(" ", MaxHeaderBytes+1), nil), 10, "at most"},
		{"float64", file(1, "{'descr': '<f8', 'fortran_order': False, 'shape': (2,), }", f32(0, 0, 0, 0)), 10, "only little-endian float32"},
		{"big endian", file(1, "{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }", f32(0, 0)), 10, "'<f4'"},
		{"fortran", file(1, "{'descr': '<f4', 'fortran_order': True, 'shape': (2,), }", f32(0, 0)), 10, "only C order"},
		{"over the limit", file(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (100000, 100000), }", nil), 1 << 20, "more than 1048576 elements"},
		{"data short", file(1, ok, f32(1)), 10, "unexpected EOF"},
		{"missing key", file(1, "{'descr': '<f4', 'shape': (2,)}", nil), 10, `no "fortran_order" key`},
		{"unknown key", file(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'x': 1}", nil), 10, `unknown key "x"`},
		{"key twice", file(1, "{'descr': '<f4', 'descr': '<f4'}", nil), 10, "twice"},
		{"negative axis", file(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (-1,)}", nil), 10, "not a length"},
		{"bad bool", file(1, "{'descr': '<f4', 'fortran_order': 0, 'shape': (2,)}", nil), 10, "want True or False"},
		{"trailing text", file(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2,)} x", nil), 10, "text after"},
		{"unterminated", file(1, "{'descr: '<f4'", nil), 10, "want ':'"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, err := Read(bytes.NewReader(tt.in), tt.limit)
			if tt.want == "" {
				if err != nil || len(a.Data) != 2 || a.Data[0] != 1.5 || a.Data[1] != -2 {
					t.Fatalf("got %+v, %v", a, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got %v, want %q", err, tt.want)
			}
		})
	}
}

func TestWriteShapeMismatch(t *testing.T) {
	for _, a := range []*Array{{Shape: []int{3}, Data: make([]float32, 2)}, {Shape: []int{-1}}} {
		if err := Write(&bytes.Buffer{}, a); err == nil {
			t.Errorf("%v with %d elements written", a.Shape, len(a.Data))
		}
	}
}

// FuzzRead feeds arbitrary bytes to the reader: it must return an array or
// an error, never panic, and never allocate past the limit.
func FuzzRead(f *testing.F) {
	var buf bytes.Buffer
	Write(&buf, &Array{Shape: []int{2, 3}, Data: make([]float32, 6)})
	f.Add(buf.Bytes())
	f.Add(file(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (), }", make([]byte, 4)))
	f.Add(file(3, "{'shape': (1, 2,), 'fortran_order': False, 'descr': '<f4'}", make([]byte, 8)))
	f.Fuzz(func(t *testing.T, b []byte) {
		a, err := Read(bytes.NewReader(b), 1<<16)
		if err != nil {
			return
		}
		n, err := Elements(a.Shape, 1<<16)
		if err != nil || n != int64(len(a.Data)) {
			t.Fatalf("shape %v with %d elements: %v", a.Shape, len(a.Data), err)
		}
	})
}

// FuzzReadHeader feeds arbitrary bytes to the header reader, which loaders use to check a
// header against its file before allocating: it must never panic, read past the header,
// allocate more than the header's bound, or pass a shape over the limit.
func FuzzReadHeader(f *testing.F) {
	var buf bytes.Buffer
	Write(&buf, &Array{Shape: []int{2, 3}, Data: make([]float32, 6)})
	f.Add(buf.Bytes())
	f.Add(file(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (1073741824, 1073741824), }", nil))
	f.Add(file(2, "{'descr': '<f4', 'fortran_order': False, 'shape': (0, 99999999999999999999), }", nil))
	f.Fuzz(func(t *testing.T, b []byte) {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		h, n, off, err := ReadHeader(bytes.NewReader(b), 1<<16)
		runtime.ReadMemStats(&after)
		if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 8*MaxHeaderBytes {
			t.Fatalf("%d bytes allocated for a header", alloc)
		}
		if err != nil {
			return
		}
		if off > int64(len(b)) || n > 1<<16 {
			t.Fatalf("header of %d bytes in a %d-byte file, %d elements", off, len(b), n)
		}
		if m, err := Elements(h.Shape, 1<<16); err != nil || m != n {
			t.Fatalf("shape %v: %d elements, said %d: %v", h.Shape, m, n, err)
		}
	})
}
