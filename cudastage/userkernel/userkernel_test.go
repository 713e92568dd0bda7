package userkernel

import (
	"errors"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/imgpipe/imgpipe/cudastage/nvrtc"
	"github.com/imgpipe/imgpipe/stages"
)

// TestMain lets the tests use CUDA 11's NVRTC too (see package nvrtc's tests).
func TestMain(m *testing.M) {
	nvrtc.Spec.Sonames = append(nvrtc.Spec.Sonames, "libnvrtc.so.11.2")
	os.Exit(m.Run())
}

func TestParseArgs(t *testing.T) {
	tests := []struct {
		in   string
		want []Scalar
		err  string
	}{
		{in: "", want: nil},
		{in: "  ", want: nil},
		{in: "3", want: []Scalar{{I: 3}}},
		{in: "-7, 1.5 ,2f,1e3", want: []Scalar{{I: -7}, {Float: true, F: 1.5}, {Float: true, F: 2}, {Float: true, F: 1000}}},
		{in: "2147483647", want: []Scalar{{I: 2147483647}}},
		{in: "2147483648", err: "want an int32"},
		{in: "x", err: "want an int32"},
		{in: "1,,2", err: "argument 2"},
		{in: "1e39", err: "finite float32"},
		{in: "nan.", err: "finite float32"},
		{in: strings.Repeat("1,", MaxParams) + "1", err: "at most"},
	}
	for _, tt := range tests {
		got, err := ParseArgs(tt.in)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("%q: got %v, want an error with %q", tt.in, err, tt.err)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%q: got %v, %v; want %v", tt.in, got, err, tt.want)
		}
	}
}

func TestScalarStringRoundTrip(t *testing.T) {
	for _, s := range []Scalar{{I: 0}, {I: -5}, {Float: true, F: 2}, {Float: true, F: 1.5}, {Float: true, F: 1e-7}, {Float: true, F: 3e20}} {
		got, err := ParseArgs(s.String())
		if err != nil || len(got) != 1 || got[0] != s {
			t.Errorf("%+v → %q → %+v, %v", s, s.String(), got, err)
		}
	}
}

func TestOutShape(t *testing.T) {
	in := stages.Shape{W: 5, H: 2, C: 3}
	want := map[Out]stages.Shape{
		OutSame: {W: 5, H: 2, C: 3}, OutGray: {W: 5, H: 2, C: 1},
		OutRGB: {W: 5, H: 2, C: 3}, OutTranspose: {W: 2, H: 5, C: 3},
	}
	for _, o := range OutRules {
		if got := o.Shape(in); got != want[o] {
			t.Errorf("%s: %+v, want %+v", o, got, want[o])
		}
	}
	if got := OutRGB.Shape(stages.Shape{W: 1, H: 1, C: 1}); got.C != 3 {
		t.Errorf("rgb of gray: %+v", got)
	}
}

// The calling convention, value by value.
func TestArgs(t *testing.T) {
	k := &Kernel{Params: []Scalar{{Float: true, F: 1.5}, {I: -3}}}
	in := Image{Shape: stages.Shape{W: 7, H: 5, C: 3}, Ptr: 0x1000, Pitch: 21}
	out := Image{Shape: stages.Shape{W: 5, H: 7, C: 1}, Ptr: 0x9000, Pitch: 5}
	args := k.Args(in, out)
	var got []any
	for _, a := range args {
		got = append(got, reflect.ValueOf(a).Elem().Interface())
	}
	want := []any{uint64(0x1000), uint64(0x9000), int32(5), int32(7), int32(1), int32(21), int32(5), int32(7), int32(5), int32(3), float32(1.5), int32(-3)}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got  %v\nwant %v", got, want)
	}
}

// The array calling convention, value by value: in, out, n, ndim, shape, the parameters.
func TestArrayArgs(t *testing.T) {
	k := &Kernel{Params: []Scalar{{Float: true, F: 2}, {I: 7}}, Array: true}
	args := k.ArrayArgs(Array{In: 0x1000, Out: 0x9000, N: 1 << 33, NDim: 3, Shape: 0x7700})
	var got []any
	for _, a := range args {
		got = append(got, reflect.ValueOf(a).Elem().Interface())
	}
	want := []any{uint64(0x1000), uint64(0x9000), int64(1 << 33), int32(3), uint64(0x7700), float32(2), int32(7)}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got  %v\nwant %v", got, want)
	}
	for n, blocks := range map[int64]uint32{1: 1, 256: 1, 257: 2, 1 << 28: 1 << 20} {
		if g := ArrayGrid(n); g != [3]uint32{blocks, 1, 1} {
			t.Errorf("ArrayGrid(%d) = %v, want %d blocks", n, g, blocks)
		}
	}
}

func TestGrid(t *testing.T) {
	tests := []struct {
		s    stages.Shape
		want [3]uint32
	}{
		{stages.Shape{W: 1, H: 1, C: 1}, [3]uint32{1, 1, 1}},
		{stages.Shape{W: 16, H: 17, C: 3}, [3]uint32{1, 2, 1}},
		{stages.Shape{W: 1920, H: 1080, C: 3}, [3]uint32{120, 68, 1}},
	}
	for _, tt := range tests {
		if got := Grid(tt.s); got != tt.want {
			t.Errorf("%+v: %v, want %v", tt.s, got, tt.want)
		}
	}
}

const invertSrc = `extern "C" __global__ void invert(const unsigned char *in, unsigned char *out,
    int width, int height, int channels, int in_pitch, int out_pitch,
    int in_width, int in_height, int in_channels) {
    int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= width || y >= height) return;
    for (int c = 0; c < channels; c++)
        out[y * out_pitch + x * channels + c] = 255 - in[y * in_pitch + x * in_channels + c];
}
__global__ void helper() {}
`

func TestCheck(t *testing.T) {
	base := Kernel{File: "invert.cu", Source: invertSrc, Fn: "invert", Out: OutSame}
	tests := []struct {
		name  string
		edit  func(k *Kernel)
		nvrtc bool // the check reaches NVRTC
		want  string
	}{
		{name: "bad fn", edit: func(k *Kernel) { k.Fn = "in vert" }, want: "fn="},
		{name: "bad out", edit: func(k *Kernel) { k.Out = "wide" }, want: "out="},
		{name: "too many params", edit: func(k *Kernel) { k.Params = make([]Scalar, MaxParams+1) }, want: "at most"},
		{name: "array out", edit: func(k *Kernel) { k.Array, k.Out = true, OutGray }, want: "an array kernel writes an array of its input's shape"},
		{name: "ok", edit: func(*Kernel) {}, nvrtc: true},
		{name: "no such function", edit: func(k *Kernel) { k.Fn = "invrt" }, nvrtc: true, want: "invert.cu defines no kernel invrt"},
		{name: "compile error", edit: func(k *Kernel) { k.Source = strings.Replace(k.Source, "255 -", "255 - q", 1) }, nvrtc: true, want: "invert.cu:7"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.nvrtc {
				if _, err := nvrtc.Probe(); err != nil {
					t.Skipf("no NVRTC: %v", err)
				}
			}
			k := base
			tt.edit(&k)
			err := k.Check(t.TempDir())
			if tt.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got %v, want an error with %q", err, tt.want)
			}
			var ce *nvrtc.CompileError
			if tt.name == "compile error" && !errors.As(err, &ce) {
				t.Errorf("a compile error must be a *nvrtc.CompileError, got %T", err)
			}
		})
	}
}

func TestCheckFunctionNotCUBIN(t *testing.T) {
	k := &Kernel{File: "k.cu", Fn: "f"}
	if err := k.checkFunction([]byte("not elf")); err == nil || !strings.Contains(err.Error(), "not a CUBIN") {
		t.Errorf("got %v", err)
	}
}
