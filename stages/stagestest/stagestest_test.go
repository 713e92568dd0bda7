package stagestest_test

import (
	"bytes"
	"fmt"
	randv1 "math/rand"
	"math/rand/v2"
	"testing"

	"github.com/imgpipe/imgpipe/stages"
	"github.com/imgpipe/imgpipe/stages/stagestest"
)

// RandImage's bytes are byte(Uint32()) of the generator's values in order, packed.
func TestRandImage(t *testing.T) {
	m := stagestest.RandImage(rand.New(rand.NewPCG(1, 2)), 5, 3, 3)
	if m.W != 5 || m.H != 3 || m.C != 3 || m.Stride != 15 || len(m.Pix) != 45 {
		t.Fatalf("got %v stride %d, %d bytes; want 5x3x3 packed", m.Shape(), m.Stride, len(m.Pix))
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for i, b := range m.Pix {
		if want := byte(rng.Uint32()); b != want {
			t.Fatalf("byte %d = %d, want %d", i, b, want)
		}
	}
}

// ReadImage's bytes are one Read of the reader: for math/rand (v1), the same bytes as
// reading the image row by row, and as one Read of the same length.
func TestReadImage(t *testing.T) {
	m := stagestest.ReadImage(randv1.New(randv1.NewSource(7)), 4, 6, 1)
	want := make([]byte, 24)
	randv1.New(randv1.NewSource(7)).Read(want)
	if m.Shape() != (stages.Shape{W: 4, H: 6, C: 1}) || !bytes.Equal(m.Pix, want) {
		t.Fatalf("got %v %v, want 4x6x1 %v", m.Shape(), m.Pix, want)
	}
	defer func() {
		if recover() == nil {
			t.Error("ReadImage of a short reader did not panic")
		}
	}()
	stagestest.ReadImage(bytes.NewReader(make([]byte, 3)), 2, 2, 1)
}

func TestDiff(t *testing.T) {
	a := stagestest.RandImage(rand.New(rand.NewPCG(3, 4)), 7, 5, 3)
	// b holds a's pixels at a larger stride, with different padding.
	b := &stages.Image{W: 7, H: 5, C: 3, Stride: 24, Pix: bytes.Repeat([]byte{0xA5}, 5*24)}
	for y := range a.H {
		copy(b.Row(y), a.Row(y))
	}
	if d := stagestest.Diff(b, a); d != "" {
		t.Errorf("equal pixels at another stride: %s", d)
	}
	b.Row(3)[2*3+1] ^= 1
	b.Row(4)[0] ^= 1 // a later difference, not the one named
	want := fmt.Sprintf("pixel (2, 3) channel 1 = %d, want %d", b.Row(3)[7], a.Row(3)[7])
	if d := stagestest.Diff(b, a); d != want {
		t.Errorf("Diff = %q, want %q", d, want)
	}
	if d, want := stagestest.Diff(stages.NewImage(7, 5, 1), a), "shape 7x5x1, want 7x5x3"; d != want {
		t.Errorf("Diff = %q, want %q", d, want)
	}
}

// A test compares an output with its reference and reports the first difference.
func ExampleDiff() {
	want := stagestest.RandImage(rand.New(rand.NewPCG(1, 1)), 4, 4, 1)
	got := stages.NewImage(4, 4, 1)
	copy(got.Pix, want.Pix)
	got.Pix[1*4+2] = want.Pix[1*4+2] + 1
	fmt.Println(stagestest.Diff(got, want) != "")
	got.Pix[1*4+2] = want.Pix[1*4+2]
	fmt.Printf("%q\n", stagestest.Diff(got, want))
	// Output:
	// true
	// ""
}
