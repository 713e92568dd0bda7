package stages

import (
	"bytes"
	"errors"
	"fmt"
	"image/jpeg"
	"io"
	"math/rand"
	"strings"
	"sync"
	"testing"
)

var turboOpt = DecodeOptions{Orient: true, JPEG: JPEGTurbo}

// requireTurbo skips the test when libjpeg-turbo cannot be loaded here.
func requireTurbo(t testing.TB) {
	t.Helper()
	if err := JPEGTurbo.Check(); err != nil {
		t.Skipf("libjpeg-turbo not usable (apt-get install libturbojpeg0): %v", err)
	}
}

// TestDecodeTurboLimit checks that the pixel limit and the size sanity check
// refuse a file before anything is allocated or decoded.
func TestDecodeTurboLimit(t *testing.T) {
	requireTurbo(t)
	good := fixtures(t)["sub420.jpg"] // 23x13, baseline
	for _, tc := range []struct {
		name string
		data []byte
		max  int64
		want error
	}{
		{"over max_pixels", good, 23*13 - 1, ErrTooLarge},
		{"header claims 60000x60000", setJPEGSize(t, good, 60000, 60000), 0, ErrTooLarge},
		{"header claims 9000x9000 in 858 bytes", setJPEGSize(t, good, 9000, 9000), 0, io.ErrUnexpectedEOF},
	} {
		t.Run(tc.name, func(t *testing.T) {
			calls := 0
			_, err := Decode(tc.data, DecodeOptions{MaxPixels: tc.max, JPEG: JPEGTurbo}, func(w, h, c int) (*Image, error) {
				calls++
				return NewImage(w, h, c), nil
			})
			if !errors.Is(err, tc.want) {
				t.Fatalf("error %v, want %v", err, tc.want)
			}
			if calls != 0 {
				t.Fatalf("alloc called %d times for a refused file", calls)
			}
		})
	}
	// At the limit exactly it decodes.
	if _, err := Decode(good, DecodeOptions{MaxPixels: 23 * 13, JPEG: JPEGTurbo}, nil); err != nil {
		t.Fatal(err)
	}
}

// TestDecodeTurboBadInput feeds truncated, empty and garbage files: each
// must give an error (no panic, no image), and where Go's decoder fails the
// turbo path must fail too.
func TestDecodeTurboBadInput(t *testing.T) {
	requireTurbo(t)
	fx := fixtures(t)
	type input struct {
		name string
		data []byte
	}
	var inputs []input
	for _, name := range []string{"sub420.jpg", "sub444.jpg", "progressive.jpg", "progressive_gray.jpg", "orient_6.jpg", "cmyk.jpg"} {
		d := fx[name]
		for _, n := range []int{2, 3, 20, 200, len(d) / 2, len(d) - 40, len(d) - 2, len(d) - 1} {
			inputs = append(inputs, input{fmt.Sprintf("%s cut at %d", name, n), d[:n]})
		}
	}
	inputs = append(inputs,
		input{"zero bytes", nil},
		input{"garbage", []byte("this is not an image at all, honestly")},
		input{"SOI and garbage", append([]byte{0xff, 0xd8}, bytes.Repeat([]byte{0x5a}, 300)...)},
		input{"SOI EOI", []byte{0xff, 0xd8, 0xff, 0xd9}},
	)
	for _, in := range inputs {
		t.Run(in.name, func(t *testing.T) {
			_, goErr := Decode(in.data, DecodeOptions{Orient: true}, nil)
			m, err := Decode(in.data, turboOpt, nil)
			if err == nil || m != nil {
				t.Fatalf("got %v, %v; want an error (Go's decoder says %v)", m, err, goErr)
			}
			if goErr == nil {
				t.Fatalf("Go's decoder takes it, turbo says %v", err)
			}
		})
	}
	// A file cut in its scan data reads as the Go path's "unexpected EOF".
	d := fx["sub420.jpg"]
	for _, n := range []int{len(d) - 40, len(d) - 2} {
		_, err := Decode(d[:n], turboOpt, nil)
		if err != io.ErrUnexpectedEOF {
			t.Errorf("cut at %d: %v, want io.ErrUnexpectedEOF", n, err)
		}
	}
}

// TestDecodeTurboDamaged checks that libjpeg-turbo's warnings fail a file
// exactly when Go's decoder fails it: corrupt entropy-coded data fails both,
// stray bytes before a marker fail neither.
func TestDecodeTurboDamaged(t *testing.T) {
	requireTurbo(t)
	var b bytes.Buffer
	if err := jpeg.Encode(&b, toRGBA(smoothImage(rand.New(rand.NewSource(5)), 64, 64, 3, 0)), &jpeg.Options{Quality: 90}); err != nil {
		t.Fatal(err)
	}
	good := b.Bytes()
	sos := bytes.LastIndex(good, []byte{0xff, 0xda})
	s := sos + 2 + int(good[sos+2])<<8 + int(good[sos+3])
	badHuffman := bytes.Clone(good)
	for i := s + 8; i < s+40; i += 2 {
		badHuffman[i], badHuffman[i+1] = 0xff, 0x00 // all-ones codes
	}
	extraneous := append(append(bytes.Clone(good[:len(good)-2]), "junk"...), 0xff, 0xd9)
	for _, tc := range []struct {
		name string
		data []byte
		ok   bool
	}{
		{"bad Huffman code", badHuffman, false},
		{"extraneous bytes before EOI", extraneous, true},
	} {
		_, goErr := Decode(tc.data, DecodeOptions{}, nil)
		_, err := Decode(tc.data, turboOpt, nil)
		if (goErr == nil) != tc.ok || (err == nil) != tc.ok {
			t.Errorf("%s: Go says %v, turbo says %v; want both to succeed: %v", tc.name, goErr, err, tc.ok)
		}
	}
}

// TestDecodeTurboAlloc checks the allocator's contract on both turbo paths
// (upright: straight into the buffer; turned: after decoding).
func TestDecodeTurboAlloc(t *testing.T) {
	requireTurbo(t)
	fx := fixtures(t)
	for _, name := range []string{"orient_1.jpg", "orient_6.jpg"} {
		data := fx[name]
		t.Run(name, func(t *testing.T) {
			_, err := Decode(data, turboOpt, func(w, h, c int) (*Image, error) { return nil, errors.New("pool empty") })
			if err == nil || !strings.Contains(err.Error(), "pool empty") {
				t.Errorf("failing alloc: %v", err)
			}
			_, err = Decode(data, turboOpt, func(w, h, c int) (*Image, error) { return NewImage(w+1, h, c), nil })
			if err == nil || !strings.Contains(err.Error(), "allocator returned a bad image") {
				t.Errorf("wrong-size alloc: %v", err)
			}
			_, err = Decode(data, turboOpt, func(w, h, c int) (*Image, error) {
				return &Image{W: w, H: h, C: c, Stride: w * c, Pix: make([]byte, w*h*c-1)}, nil
			})
			if err == nil || !strings.Contains(err.Error(), "allocator returned a bad image") {
				t.Errorf("short buffer: %v", err)
			}
		})
	}
	// A turned file that is corrupt takes no buffer; an upright one does
	// (it is decoded in place), as Alloc's doc says.
	for name, wantCalls := range map[string]int{"orient_6.jpg": 0, "orient_1.jpg": 1} {
		d := fx[name]
		calls := 0
		_, err := Decode(d[:len(d)-2], turboOpt, func(w, h, c int) (*Image, error) { calls++; return NewImage(w, h, c), nil })
		if err == nil || calls != wantCalls {
			t.Errorf("%s truncated: error %v, %d alloc calls, want an error and %d", name, err, calls, wantCalls)
		}
	}
}

// TestDecodeTurboConcurrent decodes good and bad files from 8 goroutines
// at once (run it with -race) and checks each result against a serial
// decode: handles and error messages must not leak between goroutines.
func TestDecodeTurboConcurrent(t *testing.T) {
	requireTurbo(t)
	fx := fixtures(t)
	rng := rand.New(rand.NewSource(3))
	var inputs [][]byte
	for _, name := range []string{"sub420.jpg", "sub410.jpg", "cmyk.jpg", "progressive.jpg", "orient_5.jpg", "orient_8.jpg"} {
		inputs = append(inputs, fx[name], fx[name][:len(fx[name])/2])
	}
	for i := 0; i < 4; i++ {
		var b bytes.Buffer
		if err := jpeg.Encode(&b, toRGBA(smoothImage(rng, 97+i*31, 61+i*17, 3, 0)), &jpeg.Options{Quality: 85}); err != nil {
			t.Fatal(err)
		}
		inputs = append(inputs, b.Bytes())
	}
	type result struct {
		m   *Image
		err string
	}
	run := func(data []byte) result {
		m, err := Decode(data, turboOpt, nil)
		if err != nil {
			return result{err: err.Error()}
		}
		return result{m: m}
	}
	want := make([]result, len(inputs))
	for i, d := range inputs {
		want[i] = run(d)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := 0; k < 20; k++ {
				i := (g*7 + k*5) % len(inputs)
				got := run(inputs[i])
				switch {
				case got.err != want[i].err:
					errs <- fmt.Errorf("input %d: error %q, serially %q", i, got.err, want[i].err)
					return
				case got.m != nil && !bytes.Equal(got.m.Pix, want[i].m.Pix):
					errs <- fmt.Errorf("input %d: pixels differ from the serial decode", i)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// FuzzDecodeTurbo checks that no input crashes the turbo path, and that a
// success is consistent with the header, as FuzzDecode does for Go's.
func FuzzDecodeTurbo(f *testing.F) {
	for name, data := range fixtures(f) {
		if strings.HasSuffix(name, ".jpg") {
			f.Add(data)
		}
	}
	for _, data := range arithFixtures(f) {
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		requireTurbo(t)
		opt := DecodeOptions{MaxPixels: 1 << 20, Orient: true, JPEG: JPEGTurbo}
		m, err := Decode(data, opt, nil)
		if err != nil {
			if m != nil {
				t.Fatal("image and error both returned")
			}
			return
		}
		if err := m.Check(); err != nil || m.C != 3 {
			t.Fatalf("inconsistent image: %v, C=%d", err, m.C)
		}
		hd, err := DecodeHeader(data, opt)
		if err != nil || hd.W != m.W || hd.H != m.H {
			t.Fatalf("header %+v (%v) disagrees with the %dx%d result", hd, err, m.W, m.H)
		}
	})
}
