package sched_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	. "github.com/imgpipe/imgpipe/cudastage/sched"
	"github.com/imgpipe/imgpipe/cudastage/sched/schedtest"

	"github.com/imgpipe/imgpipe/stages"
	"github.com/imgpipe/imgpipe/stages/stagestest"
)

// input is one image for the executor: pixels, or a file the device decodes.
type input struct {
	raw  *stages.Image
	file []byte
}

// jpegFile encodes a w×h image of smooth random colours as a baseline JPEG.
func jpegFile(t testing.TB, rng *rand.Rand, w, h int) []byte {
	t.Helper()
	m := image.NewRGBA(image.Rect(0, 0, w, h))
	r0, g0, b0 := rng.IntN(200), rng.IntN(200), rng.IntN(200)
	for y := range h {
		for x := range w {
			m.Set(x, y, color.RGBA{uint8(r0 + x%50), uint8(g0 + y%50), uint8(b0 + (x+y)%50), 255})
		}
	}
	var b bytes.Buffer
	if err := jpeg.Encode(&b, m, &jpeg.Options{Quality: 90}); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// fixture reads a file of stages/testdata.
func fixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "stages", "testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// truncated keeps a JPEG's headers and cuts its scan short: the header parses, the
// pixels do not decode.
func truncated(t testing.TB, data []byte) []byte {
	t.Helper()
	i := bytes.Index(data, []byte{0xFF, 0xDA})
	if i < 0 {
		t.Fatal("no scan")
	}
	return append([]byte(nil), data[:i+20]...)
}

// mixedInputs are raw images and files (baseline, progressive, oriented, 1×1 and odd
// sizes) interleaved; bad, when not nil, goes in the middle.
func mixedInputs(t testing.TB, n int, bad []byte) []input {
	rng := rand.New(rand.NewPCG(11, uint64(n)))
	fixed := [][]byte{fixture(t, "orient_6.jpg"), fixture(t, "progressive.jpg"), fixture(t, "sub420.jpg"), fixture(t, "orient_8.jpg")}
	var in []input
	for i := range n {
		switch i % 3 {
		case 0:
			sz := mixedSizes[i%len(mixedSizes)]
			in = append(in, input{raw: stagestest.RandImage(rng, sz[0], sz[1], 3)})
		case 1:
			sz := mixedSizes[(i+3)%len(mixedSizes)]
			in = append(in, input{file: jpegFile(t, rng, sz[0], sz[1])})
		default:
			in = append(in, input{file: fixed[i%len(fixed)]})
		}
	}
	if bad != nil {
		in[n/2] = input{file: bad}
	}
	return in
}

// pushInputs reserves, fills and commits every input (tag = index) in order, then closes
// the input: files through ReserveFile with the header's shape and orientation and the
// device's route.
func pushInputs(ctx context.Context, e *Executor, dev *schedtest.FakeDevice, in []input) error {
	defer e.CloseInput()
	for i, x := range in {
		if x.raw != nil {
			r, err := e.Reserve(ctx, x.raw.W, x.raw.H, x.raw.C, i)
			if err != nil {
				return err
			}
			copy(r.Image().Pix, x.raw.Pix)
			r.Commit()
			continue
		}
		hd, err := stages.DecodeHeader(x.file, stages.DecodeOptions{Orient: true})
		if err != nil {
			return fmt.Errorf("input %d: %w", i, err)
		}
		r, err := e.ReserveFile(ctx, File{Size: len(x.file), Shape: Shape{W: hd.W, H: hd.H, C: 3}, Orient: hd.Orientation, Decoder: dev.DecodeRoute(x.file)}, i)
		if err != nil {
			return fmt.Errorf("input %d: %w", i, err)
		}
		copy(r.Bytes(), x.file)
		r.Commit()
	}
	return nil
}

// runChecked pushes in through e (pushInputs), checks every result against the CPU
// chain (image, and histogram when ops make one) and waits for e.
func runChecked(t *testing.T, e *Executor, dev *schedtest.FakeDevice, ops []Op, in []input) {
	t.Helper()
	errc := make(chan error, 1)
	go func() { errc <- pushInputs(context.Background(), e, dev, in) }()
	n := 0
	for r := range e.Results() {
		i := r.Tag.(int)
		n++
		want, hist := cpuRef(ops, decoded(t, in[i]))
		if r.Err != nil {
			t.Errorf("input %d: %v", i, r.Err)
		} else if d := stagestest.Diff(r.Image, want); d != "" || (r.Hist != nil && *r.Hist != *hist) {
			t.Errorf("input %d: %s (histogram equal: %v)", i, d, r.Hist == nil || *r.Hist == *hist)
		}
		r.Release()
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if err := e.Wait(); err != nil || n != len(in) {
		t.Errorf("Wait = %v, %d results of %d", err, n, len(in))
	}
}

// decoded is what the CPU path decodes for an input.
func decoded(t testing.TB, x input) *stages.Image {
	if x.raw != nil {
		return x.raw
	}
	backend, _ := stages.ResolveJPEGBackend(stages.JPEGAuto) // the fake's decoder
	m, err := stages.Decode(x.file, stages.DecodeOptions{Orient: true, JPEG: backend}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestFilesMixedWithPixels(t *testing.T) {
	ops := []Op{MustBlurOp(t, 1), TransposeOp(), HistogramOp()}
	bad := truncated(t, fixture(t, "sub420.jpg"))
	for _, whole := range []bool{false, true} {
		t.Run(fmt.Sprintf("batch-fails-whole=%v", whole), func(t *testing.T) {
			t.Parallel()
			dev := schedtest.NewFake(schedtest.FakeConfig{CopyLatency: 20 * time.Microsecond, BatchFailsWhole: whole})
			e := startExec(t, context.Background(), dev, Config{Ops: ops, Streams: 2, Slots: 3, Batch: 5, SlotBytes: 40000, Linger: time.Millisecond})
			in := mixedInputs(t, 31, bad)
			errc := make(chan error, 1)
			go func() { errc <- pushInputs(context.Background(), e, dev, in) }()
			seen := 0
			for r := range e.Results() {
				i := r.Tag.(int)
				seen++
				x := in[i]
				switch {
				case x.raw != nil && r.Decoder != "":
					t.Errorf("input %d: raw pixels with decoder %q", i, r.Decoder)
				case x.file != nil && r.Decoder != dev.DecodeRoute(x.file):
					t.Errorf("input %d: decoder %q, want %q", i, r.Decoder, dev.DecodeRoute(x.file))
				}
				if i == len(in)/2 {
					if r.Err == nil || r.Image != nil || r.Hist != nil {
						t.Errorf("corrupt file: err %v, image %v, hist %v; want only an error", r.Err, r.Image != nil, r.Hist != nil)
					}
					r.Release()
					continue
				}
				if r.Err != nil {
					t.Errorf("input %d: %v", i, r.Err)
					r.Release()
					continue
				}
				want, hist := cpuRef(ops, decoded(t, x))
				if d := stagestest.Diff(r.Image, want); d != "" {
					t.Errorf("input %d: %s", i, d)
				}
				if r.Hist == nil || *r.Hist != *hist {
					t.Errorf("input %d: histogram differs", i)
				}
				r.Release()
			}
			if err := <-errc; err != nil {
				t.Fatal(err)
			}
			if err := e.Wait(); err != nil {
				t.Fatal(err)
			}
			if seen != len(in) {
				t.Errorf("%d results, want %d", seen, len(in))
			}
			st := e.Stats()
			files := 0
			for _, x := range in {
				if x.file != nil {
					files++
				}
			}
			if st.Files != int64(files) || st.DecodeFailed != 1 || st.Decode <= 0 {
				t.Errorf("stats: %d files, %d failed, decode %v; want %d, 1, > 0", st.Files, st.DecodeFailed, st.Decode, files)
			}
			calls := dev.Calls()
			if whole && (calls["Decode batch failed"] != 1 || calls["Decode single"] <= calls["Decode batch failed"]) {
				t.Errorf("calls %v: want one failed batch decoded again one by one", calls)
			}
			if !whole && calls["Decode batch failed"] != 0 {
				t.Errorf("calls %v: a batch failed whole", calls)
			}
			if n := e.FreeSlots(); n != e.Slots() {
				t.Errorf("%d of %d slots free after every release", n, e.Slots())
			}
		})
	}
}

// TestFilesCrossOnlyTheirBytes checks that a batch of files uploads nothing but its
// launch tables: the files' bytes are the decoder's to read.
func TestFilesCrossOnlyTheirBytes(t *testing.T) {
	ops := []Op{GrayscaleOp()}
	dev := schedtest.NewFake(schedtest.FakeConfig{})
	e := startExec(t, context.Background(), dev, Config{Ops: ops, Streams: 1, Slots: 2, Batch: 4, SlotBytes: 1 << 16})
	rng := rand.New(rand.NewPCG(1, 2))
	var in []input
	for range 8 {
		in = append(in, input{file: jpegFile(t, rng, 40, 30)})
	}
	go pushInputs(context.Background(), e, dev, in)
	for r := range e.Results() {
		if r.Err != nil {
			t.Error(r.Err)
		}
		r.Release()
	}
	if err := e.Wait(); err != nil {
		t.Fatal(err)
	}
	st := e.Stats()
	tables := int64(0)
	for range st.Batches {
		tables += int64((dev.TableBytes(ops[0], 4) + Align - 1) &^ (Align - 1))
	}
	if st.H2DBytes != tables {
		t.Errorf("H2D %d bytes, want only the launch tables' %d", st.H2DBytes, tables)
	}
	var fileBytes int64
	for _, x := range in {
		fileBytes += int64(len(x.file))
	}
	if st.FileBytes != fileBytes || st.Files != int64(len(in)) {
		t.Errorf("%d files of %d bytes, want %d of %d", st.Files, st.FileBytes, len(in), fileBytes)
	}
}

func TestEncodeLastOp(t *testing.T) {
	tests := []struct {
		name  string
		bound func(Shape) int
	}{
		{"generous bound", PNGBound},
		// Tiny images' PNGs take under 100 bytes; the random larger images' do not.
		{"bound too small", func(Shape) int { return 100 }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ops := []Op{GrayscaleOp(), PNGOp(tt.bound)}
			dev := schedtest.NewFake(schedtest.FakeConfig{CopyLatency: 20 * time.Microsecond})
			e := startExec(t, context.Background(), dev, Config{Ops: ops, Streams: 2, Slots: 3, Batch: 4, SlotBytes: 60000, Linger: time.Millisecond})
			in := mixedInputs(t, 20, nil)
			go pushInputs(context.Background(), e, dev, in)
			var fileBytes int64
			n, fails := 0, 0
			for r := range e.Results() {
				n++
				i := r.Tag.(int)
				gray, _ := cpuRef(ops[:1], decoded(t, in[i]))
				var want bytes.Buffer
				if err := stages.Encode(&want, gray, stages.SaveOptions{Format: "png", Compression: stages.PNGFast}); err != nil {
					t.Fatal(err)
				}
				if want.Len() > tt.bound(gray.Shape()) {
					if r.Err == nil || !strings.Contains(r.Err.Error(), "bound") || r.Encoded != nil {
						t.Errorf("input %d (%v): err %v, %d bytes; want a bound error", i, gray.Shape(), r.Err, len(r.Encoded))
					}
					fails++
					r.Release()
					continue
				}
				switch {
				case r.Err != nil:
					t.Errorf("input %d: %v", i, r.Err)
				case r.Image != nil:
					t.Errorf("input %d: an image beside the file", i)
				case !bytes.Equal(r.Encoded, want.Bytes()):
					t.Errorf("input %d: %d bytes, want the CPU's %d", i, len(r.Encoded), want.Len())
				}
				fileBytes += int64(len(r.Encoded))
				r.Release()
			}
			if err := e.Wait(); err != nil {
				t.Fatal(err)
			}
			st := e.Stats()
			// Only the files' bytes and 4 bytes of length per image come back.
			if want := fileBytes + 4*int64(n); st.D2HBytes != want {
				t.Errorf("D2H %d bytes, want %d (files and lengths)", st.D2HBytes, want)
			}
			if tt.name == "bound too small" && (fails == 0 || fails == n) {
				t.Errorf("%d of %d files over the bound: the test covers no mix", fails, n)
			}
			if n != len(in) || e.FreeSlots() != e.Slots() {
				t.Errorf("%d results of %d, %d of %d slots free", n, len(in), e.FreeSlots(), e.Slots())
			}
		})
	}
}

// TestFileSlotAccounting checks that a slot's page-locked input (files' bytes) and device
// input (decoded images) are accounted each on its own, and that sizes are refused
// before anything is taken.
func TestFileSlotAccounting(t *testing.T) {
	dev := schedtest.NewFake(schedtest.FakeConfig{})
	e := startExec(t, context.Background(), dev, Config{Ops: []Op{GrayscaleOp()}, Streams: 1, Slots: 2, Batch: 16, SlotBytes: 4096})
	ctx := context.Background()
	small := Shape{W: 8, H: 8, C: 3} // 256 bytes on the device
	// Files of 1000 bytes: four fill the page-locked input (1024 each, aligned) though the
	// device input would take 16 decoded images.
	var rs []*Reservation
	for i := range 5 {
		r, err := e.ReserveFile(ctx, File{Size: 1000, Shape: small, Orient: 1, Decoder: RouteHW}, i)
		if err != nil {
			t.Fatal(err)
		}
		rs = append(rs, r)
	}
	if rs[0].SlotID() == rs[4].SlotID() || rs[0].SlotID() != rs[3].SlotID() {
		t.Errorf("slots %d, %d, %d: want 4 files per slot", rs[0].SlotID(), rs[3].SlotID(), rs[4].SlotID())
	}
	for _, r := range rs {
		if len(r.Bytes()) != 1000 || r.Image() != nil {
			t.Fatalf("file reservation: %d bytes, image %v", len(r.Bytes()), r.Image() != nil)
		}
		r.Abort()
	}
	tooLarge := []struct {
		name string
		size int
		out  Shape
	}{
		{"file over a slot", 4097, small},
		{"image over a slot", 100, Shape{W: 40, H: 40, C: 3}},
	}
	for _, c := range tooLarge {
		if _, err := e.ReserveFile(ctx, File{Size: c.size, Shape: c.out, Orient: 1, Decoder: RouteHW}, nil); !errors.Is(err, ErrTooLarge) {
			t.Errorf("%s: %v, want ErrTooLarge", c.name, err)
		}
	}
	e.CloseInput()
	for r := range e.Results() {
		r.Release()
		t.Error("a result from aborted reservations")
	}
	if err := e.Wait(); err != nil {
		t.Fatal(err)
	}
	if e.FreeSlots() != e.Slots() {
		t.Errorf("%d of %d slots free", e.FreeSlots(), e.Slots())
	}
}

// noDecoder is a device without a file decoder.
type noDecoder struct{ Device }

func TestFileErrors(t *testing.T) {
	ctx := context.Background()
	good := Shape{W: 8, H: 8, C: 3}
	t.Run("reserve", func(t *testing.T) {
		dev := schedtest.NewFake(schedtest.FakeConfig{})
		e := startExec(t, ctx, dev, Config{Ops: []Op{GrayscaleOp()}, Streams: 1, Slots: 1, Batch: 2, SlotBytes: 4096})
		hw := func(size int, out Shape, orient, scale int) File {
			return File{Size: size, Shape: out, Orient: orient, Scale: scale, Decoder: RouteHW}
		}
		cases := []struct {
			name string
			file File
		}{
			{"gray", hw(10, Shape{W: 8, H: 8, C: 1}, 1, 1)},
			{"orientation 0", hw(10, good, 0, 1)},
			{"orientation 9", hw(10, good, 9, 1)},
			{"scale 1/3", hw(10, good, 1, 3)},
			{"scale 1/16", hw(10, good, 1, 16)},
			{"scale -2", hw(10, good, 1, -2)},
			{"no decoder", File{Size: 10, Shape: good, Orient: 1}},
			{"empty file", hw(0, good, 1, 1)},
			{"zero width", hw(10, Shape{H: 8, C: 3}, 1, 1)},
		}
		for _, c := range cases {
			if _, err := e.ReserveFile(ctx, c.file, nil); err == nil || errors.Is(err, ErrTooLarge) {
				t.Errorf("%s: %v, want a plain error", c.name, err)
			}
		}
		e.CloseInput()
	})
	t.Run("devices", func(t *testing.T) {
		for _, c := range []struct {
			name string
			dev  func(*schedtest.FakeDevice) Device
			ops  []Op
			want string
		}{
			{"no FileDecoder", func(f *schedtest.FakeDevice) Device { return noDecoder{f} }, []Op{GrayscaleOp()}, "decodes no files"},
			{"histogram only", func(f *schedtest.FakeDevice) Device { return f }, []Op{HistogramOp()}, "makes no image"},
		} {
			fake := schedtest.NewFake(schedtest.FakeConfig{})
			e, err := New(ctx, c.dev(fake), Config{Ops: c.ops, Streams: 1, Slots: 1, Batch: 2, SlotBytes: 4096})
			if err != nil {
				t.Fatal(err)
			}
			_, err = e.ReserveFile(ctx, File{Size: 10, Shape: good, Orient: 1, Decoder: RouteHW}, nil)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%s: %v, want %q", c.name, err, c.want)
			}
			e.CloseInput()
			e.Close()
			fake.Close()
		}
		fake := schedtest.NewFake(schedtest.FakeConfig{DecoderUnavailable: errors.New("libnvjpeg.so.13 not found")})
		defer fake.Close()
		if _, err := FileDecoderOf(fake); err == nil || !strings.Contains(err.Error(), "libnvjpeg") {
			t.Errorf("unavailable decoder: %v", err)
		}
		// A device with a decoder of its own decodes files whether nvJPEG loads or not.
		if fd, err := FileDecoderOf(schedtest.Turbo{FakeDevice: fake}); err != nil || fd == nil {
			t.Errorf("unavailable nvJPEG beside a TurboDecoder: %v, %v", fd, err)
		}
	})
	t.Run("encode op placement", func(t *testing.T) {
		fake := schedtest.NewFake(schedtest.FakeConfig{})
		defer fake.Close()
		noBound := PNGOp(nil)
		for _, c := range []struct {
			name string
			ops  []Op
			want string
		}{
			{"not last", []Op{PNGOp(PNGBound), GrayscaleOp()}, "last op"},
			{"no bound", []Op{GrayscaleOp(), noBound}, "without a Bound"},
			{"with a histogram", []Op{{Name: "x", Hist: true, Encode: PNGOp(PNGBound).Encode}}, "histogram"},
		} {
			_, err := New(ctx, fake, Config{Ops: c.ops, Streams: 1, Slots: 1, Batch: 2, SlotBytes: 4096})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%s: %v, want %q", c.name, err, c.want)
			}
		}
	})
}

// TestCancelWithFiles cancels a run with files reserved, being filled and on the device:
// every goroutine ends, no slot or device object is left.
func TestCancelWithFiles(t *testing.T) {
	base := runtime.NumGoroutine()
	dev := schedtest.NewFake(schedtest.FakeConfig{CopyLatency: 100 * time.Microsecond, KernelLatency: 300 * time.Microsecond})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ops := []Op{MustBlurOp(t, 1), PNGOp(PNGBound)}
	e, err := New(ctx, dev, Config{Ops: ops, Streams: 2, Slots: 3, Batch: 3, SlotBytes: 60000, Linger: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	in := mixedInputs(t, 300, nil)
	done := make(chan error, 1)
	go func() { done <- pushInputs(ctx, e, dev, in) }()
	got := 0
	for r := range e.Results() {
		got++
		if got == 10 {
			cancel()
		}
		r.Release()
	}
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("push: %v, want context.Canceled", err)
	}
	if err := e.Wait(); !errors.Is(err, context.Canceled) {
		t.Errorf("Wait = %v, want context.Canceled", err)
	}
	if got >= len(in) {
		t.Errorf("all %d results came: the cancel did not stop the run", got)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if live := dev.Live(); live != (schedtest.FakeLive{}) {
		t.Errorf("device objects left: %+v", live)
	}
	dev.Close()
	goroutinesBack(t, base)
}

// TestJPEGEncoderOf checks the device JPEG encoder's lookup and the fake's encoders:
// a device without one, one whose library is missing, and one that encodes (counted,
// closed once, failing after Close and on an injected fault).
func TestJPEGEncoderOf(t *testing.T) {
	file := []byte{0xFF, 0xD8, 0xFF, 0xD9}
	encode := func(m *stages.Image, q int) ([]byte, error) { return file, nil }
	for _, c := range []struct {
		name string
		dev  func(*schedtest.FakeDevice) Device
		cfg  schedtest.FakeConfig
		want string // the error of JPEGEncoderOf, "" for none
	}{
		{"not a JPEGEncoder", func(f *schedtest.FakeDevice) Device { return noDecoder{f} }, schedtest.FakeConfig{JPEGEncode: encode}, "encodes no JPEG files"},
		{"unavailable", func(f *schedtest.FakeDevice) Device { return f }, schedtest.FakeConfig{}, "cannot encode JPEG files: the fake device has no JPEG encoder"},
		{"available", func(f *schedtest.FakeDevice) Device { return f }, schedtest.FakeConfig{JPEGEncode: encode}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			fake := schedtest.NewFake(c.cfg)
			defer fake.Close()
			je, err := JPEGEncoderOf(c.dev(fake))
			if c.want != "" {
				if err == nil || !strings.Contains(err.Error(), c.want) {
					t.Fatalf("JPEGEncoderOf: %v, want %q", err, c.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			enc, err := je.NewJPEGEncoder()
			if err != nil {
				t.Fatal(err)
			}
			got, err := enc.Encode(stages.NewImage(2, 2, 3), 90)
			if err != nil || !bytes.Equal(got, file) {
				t.Fatalf("Encode: %x, %v", got, err)
			}
			if err := enc.Close(); err != nil {
				t.Fatal(err)
			}
			if _, err := enc.Encode(stages.NewImage(2, 2, 3), 90); err == nil {
				t.Error("Encode after Close succeeded")
			}
			if err := enc.Close(); err == nil {
				t.Error("a second Close succeeded")
			}
			calls := fake.Calls()
			if calls["JPEG encoder new"] != 1 || calls["JPEG encode"] != 1 || calls["JPEG encoder close"] != 1 {
				t.Errorf("calls %v", calls)
			}
		})
	}
	t.Run("fault", func(t *testing.T) {
		fault := errors.New("injected")
		fake := schedtest.NewFake(schedtest.FakeConfig{JPEGEncode: encode, Fault: func(call string) error {
			if call == "JPEGEncode" {
				return fault
			}
			return nil
		}})
		defer fake.Close()
		enc, err := fake.NewJPEGEncoder()
		if err != nil {
			t.Fatal(err)
		}
		defer enc.Close()
		if _, err := enc.Encode(stages.NewImage(1, 1, 1), 50); !errors.Is(err, fault) {
			t.Errorf("Encode: %v, want the injected fault", err)
		}
		if _, err := fake.NewJPEGEncoder(); !errors.Is(err, fault) {
			t.Errorf("NewJPEGEncoder on a broken device: %v, want the sticky fault", err)
		}
	})
}
