package pipeline

import (
	"bytes"
	"context"
	"errors"
	"image"
	"image/png"
	"io"
	"math/rand"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/imgpipe/imgpipe/stages"
	"github.com/imgpipe/imgpipe/stages/stagestest"
)

// bigPNG is a PNG of noise larger than HeadBytes, so that a streamed decode reads most of
// it from the file rather than from the replayed head.
func bigPNG(t testing.TB) (*stages.Image, []byte) {
	m := stagestest.ReadImage(rand.New(rand.NewSource(11)), 400, 300, 3)
	data := stagestest.Encode(t, m, "png")
	if len(data) <= HeadBytes {
		t.Fatalf("PNG of %d bytes fits in the head", len(data))
	}
	return m, data
}

// readerAtCloser is an Open input's reader that can also read at offsets, as a file can.
type readerAtCloser struct{ *bytes.Reader }

func (readerAtCloser) Close() error { return nil }

// Files of the formats the decoder streams are decoded from the file, to the same pixels;
// JPEGs, bytes given as the input and objects that cannot be read at offsets are read whole.
func TestStreamedInputs(t *testing.T) {
	want, png := bigPNG(t)
	small := stagestest.Encode(t, want, "tiff") // Go's TIFF encoder puts the IFD last: beyond the head
	jpg := stagestest.Encode(t, want, "jpeg")
	wantJPEG, err := stages.Decode(jpg, stages.DecodeOptions{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	path := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	opened := func(data []byte, at bool) func(context.Context) (io.ReadCloser, int64, error) {
		return func(context.Context) (io.ReadCloser, int64, error) {
			if at {
				return readerAtCloser{bytes.NewReader(data)}, int64(len(data)), nil
			}
			return io.NopCloser(bytes.NewReader(data)), int64(len(data)), nil
		}
	}
	for _, tc := range []struct {
		name     string
		in       Input
		want     *stages.Image
		streamed bool
	}{
		{"PNG file", Input{Name: "a.png", Path: path("a.png", png)}, want, true},
		{"TIFF file with its IFD past the head", Input{Name: "b.tif", Path: path("b.tif", small)}, want, false},
		{"JPEG file", Input{Name: "c.jpg", Path: path("c.jpg", jpg)}, wantJPEG, false},
		{"PNG bytes", Input{Name: "d.png", Data: png}, want, false},
		{"PNG object read at offsets", Input{Name: "e.png", Open: opened(png, true)}, want, true},
		{"PNG object read in order", Input{Name: "f.png", Open: opened(png, false)}, want, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			plan := compileWith(t, Builtin, "decode backend=go")
			var whole, streamed atomic.Int32
			dec := *plan.Decode
			decode, stream := dec.Decode, dec.DecodeStream
			dec.Decode = func(data []byte, alloc stages.Alloc) (*stages.Image, Decoded, error) {
				whole.Add(1)
				return decode(data, alloc)
			}
			dec.DecodeStream = func(head []byte, file io.ReaderAt, size int64, alloc stages.Alloc) (*stages.Image, Decoded, error) {
				streamed.Add(1)
				return stream(head, file, size, alloc)
			}
			plan.Decode = &dec
			sink := Collect()
			sum, err := Run(context.Background(), plan, Inputs(tc.in), sink, Options{Workers: 1})
			if err != nil || sum.OK != 1 {
				t.Fatalf("Run = %+v, %v", sum, err)
			}
			if got := sink.Results[0].Image; stagestest.Diff(got, tc.want) != "" {
				t.Error("pixels differ from Decode's")
			}
			if got := streamed.Load() == 1; got != tc.streamed || whole.Load()+streamed.Load() != 1 {
				t.Errorf("streamed %d, whole %d; want streamed %v", streamed.Load(), whole.Load(), tc.streamed)
			}
		})
	}
}

// The budget's charge for a streamed file leaves out the file's bytes, and only for one.
func TestDecodeNeedStreamed(t *testing.T) {
	_, png := bigPNG(t)
	jpg := stagestest.Encode(t, stagestest.ReadImage(rand.New(rand.NewSource(2)), 640, 480, 3), "jpeg") // longer than HeadBytes
	r := &Runner{plan: compileWith(t, Builtin, "decode")}
	withoutFile := func(data []byte) int64 {
		c, err := r.plan.Decode.Cost(data[:HeadBytes], int64(len(data)))
		if err != nil {
			t.Fatal(err)
		}
		return c.WorkBytes + int64(c.W)*int64(c.H)*ChainBytesPerPixel
	}
	for _, tc := range []struct {
		name      string
		data      []byte
		head      int // bytes of data the head holds
		canStream bool
		want      int64
		streamed  bool
	}{
		{"PNG read at offsets", png, HeadBytes, true, withoutFile(png) + HeadBytes + stages.StreamBufferBytes, true},
		{"PNG read in order", png, HeadBytes, false, withoutFile(png) + int64(len(png)), false},
		{"JPEG", jpg, HeadBytes, true, withoutFile(jpg) + int64(len(jpg)), false},
		{"header past the head", png, 8, true, -1, false},
	} {
		got, streamed, err := r.decodeNeed(tc.data[:min(len(tc.data), tc.head)], int64(len(tc.data)), tc.canStream)
		if err != nil || got != tc.want || streamed != tc.streamed {
			t.Errorf("%s: %d, streamed %v, %v; want %d, streamed %v", tc.name, got, streamed, err, tc.want, tc.streamed)
		}
	}
}

// blockingFile serves a file's head but blocks every read past it until its context ends
// (a slow disk or network file system), after first cancelling the run: the decode is
// then under way, and must stop with the context's error at its next read.
type blockingFile struct {
	*bytes.Reader
	ctx    context.Context // the run's, given to Open
	cancel func()
	once   sync.Once
	reads  atomic.Int32 // reads past the head
	closed atomic.Bool
}

func (f *blockingFile) ReadAt(p []byte, off int64) (int, error) {
	f.reads.Add(1)
	f.once.Do(f.cancel)
	<-f.ctx.Done()
	return f.Reader.ReadAt(p, off)
}

func (f *blockingFile) Close() error { f.closed.Store(true); return nil }

// A run cancelled while an image is being decoded from its file stops the decode at its
// next read and drops the input (not done, so --resume redoes it), rather than failing it.
func TestStreamedDecodeCancelled(t *testing.T) {
	_, png := bigPNG(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var file *blockingFile
	in := Input{Name: "big.png", Open: func(runCtx context.Context) (io.ReadCloser, int64, error) {
		file = &blockingFile{Reader: bytes.NewReader(png), ctx: runCtx, cancel: cancel}
		return file, int64(len(png)), nil
	}}
	var report bytes.Buffer
	sink := Collect()
	sum, err := Run(ctx, compileWith(t, Builtin, "decode | blur sigma=2"), Inputs(in), sink, Options{Workers: 1, Report: &report})
	if !errors.Is(err, context.Canceled) || !sum.Interrupted {
		t.Fatalf("Run = %+v, %v; want interrupted", sum, err)
	}
	if sum.OK+sum.Failed != 0 || len(sink.Results) != 0 {
		t.Errorf("summary %+v, %d results; want the input dropped", sum, len(sink.Results))
	}
	if n := file.reads.Load(); n != 1 {
		t.Errorf("%d reads past the head; the decode should stop at the first after the cancel", n)
	}
	if !file.closed.Load() {
		t.Error("the streamed file was left open")
	}
	if lines := reportLines(t, report.String()); len(lines) != 1 {
		t.Errorf("report %q: want only the summary", report.String())
	}
}

// A streamed PNG is never held whole: decoding a file as large as its 16-bit pixels
// allocates their two images (the decoder's and the RGB result) and small buffers, not
// the file's bytes too, which reading it whole would add (here 16 MB).
func TestStreamedPNGAllocation(t *testing.T) {
	const w, h = 1600, 1250
	m := image.NewNRGBA64(image.Rect(0, 0, w, h))
	rand.New(rand.NewSource(12)).Read(m.Pix)
	var buf bytes.Buffer
	if err := (&png.Encoder{CompressionLevel: png.NoCompression}).Encode(&buf, m); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "big.png")
	if err := os.WriteFile(p, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	size := buf.Len()
	buf = bytes.Buffer{}
	plan := compileWith(t, Builtin, "decode")
	// A budget far below the file: the input takes all of it and runs alone.
	opt := Options{Workers: 1, MemoryBudget: 4 << 20}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	sum, err := Run(context.Background(), plan, Inputs(Input{Name: "big.png", Path: p}), Collect(), opt)
	runtime.ReadMemStats(&after)
	if err != nil || sum.OK != 1 {
		t.Fatalf("Run = %+v, %v", sum, err)
	}
	const slack = 4 << 20 // head, stream and zlib buffers, the run's own
	images := int64(w * h * (8 + 3))
	if got := int64(after.TotalAlloc - before.TotalAlloc); got > images+slack {
		t.Errorf("decoding a %d-byte PNG allocated %d bytes; its images take %d (+%d slack): the file was held whole", size, got, images, slack)
	}
}
