package pipeline

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand"
	"sync/atomic"
	"testing"

	"github.com/imgpipe/imgpipe/stages/stagestest"
)

// openedReader counts, through live and peak, the objects read past their head at once.
type openedReader struct {
	r          *bytes.Reader
	read       int64
	past       bool
	live, peak *atomic.Int64
}

func (o *openedReader) Read(p []byte) (int, error) {
	if o.read >= HeadBytes && !o.past {
		o.past = true
		n := o.live.Add(1)
		for p := o.peak.Load(); n > p && !o.peak.CompareAndSwap(p, n); p = o.peak.Load() {
		}
	}
	n, err := o.r.Read(p)
	o.read += int64(n)
	return n, err
}

func (o *openedReader) Close() error { return nil }

// Inputs that Open gives (objects in a bucket) go through the memory budget like files:
// the charge is taken after the head is read and before the rest is, so with a budget of
// one image at most one object is read whole at a time.
func TestOpenInputsChargeBudgetBeforeReading(t *testing.T) {
	rng := rand.New(rand.NewSource(3))
	var live, peak atomic.Int64
	var inputs []Input
	for i := 0; i < 8; i++ {
		data := stagestest.Encode(t, stagestest.ReadImage(rng, 400, 300, 3), "png")
		if len(data) <= HeadBytes {
			t.Fatalf("test image is %d bytes, want over HeadBytes", len(data))
		}
		inputs = append(inputs, Input{Name: fmt.Sprintf("%d.png", i), Open: func(context.Context) (io.ReadCloser, int64, error) {
			return &openedReader{r: bytes.NewReader(data), live: &live, peak: &peak}, int64(len(data)), nil
		}})
	}
	plan := compileWith(t, Builtin, "decode | grayscale | histogram")
	sink := &countingSink{Sink: Collect(), live: &live}
	sum, err := Run(context.Background(), plan, Inputs(inputs...), sink, Options{Workers: 6, MemoryBudget: 10})
	if err != nil || sum.OK != len(inputs) {
		t.Fatalf("Run = %+v, %v; want %d ok", sum, err, len(inputs))
	}
	if p := peak.Load(); p != 1 {
		t.Fatalf("%d objects were read whole at once under a budget of one image; want 1", p)
	}
}

// An object over the size limit is refused from its stated size, unread.
func TestOpenInputOverLimitUnread(t *testing.T) {
	plan := compileWith(t, Builtin, "decode max_pixels=100 | histogram")
	read := false
	in := Input{Name: "big.png", Open: func(context.Context) (io.ReadCloser, int64, error) {
		read = true
		return io.NopCloser(bytes.NewReader(nil)), 1 << 40, nil
	}}
	res := Collect()
	sum, err := Run(context.Background(), plan, Inputs(in), res, Options{})
	if err != nil || sum.Failed != 1 || !read {
		t.Fatalf("Run = %+v, %v; want the input opened and failed", sum, err)
	}
}
