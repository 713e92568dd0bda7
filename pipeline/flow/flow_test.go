package flow

import (
	"context"
	"math/rand"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/reugn/go-streams/extension"
	sflow "github.com/reugn/go-streams/flow"

	"github.com/imgpipe/imgpipe/pipeline"
	"github.com/imgpipe/imgpipe/stages"
	"github.com/imgpipe/imgpipe/stages/stagestest"
)

func TestFlow(t *testing.T) {
	base := runtime.NumGoroutine()
	rng := rand.New(rand.NewSource(10))
	p := pipeline.New().Decode().Grayscale().Histogram().Save("png").WithOptions(pipeline.Options{Workers: 3})
	f, err := New(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	in := make(chan any)
	out := make(chan any)
	source := extension.NewChanSource(in)
	sink := extension.NewChanSink(out)
	// Downstream of our flow, a plain go-streams Map picks the names.
	names := sflow.NewMap(func(r pipeline.Result) string {
		if r.Err != nil {
			return r.Input + " failed: " + r.Err.Error()
		}
		return r.Input + " ok " + r.Output
	}, 1)
	go source.Via(f).Via(names).To(sink) // closes out at the end
	go func() {
		for i := 0; i < 20; i++ {
			in <- stagestest.Encode(t, stagestest.ReadImage(rng, 9, 5, 3), "png")
		}
		in <- pipeline.Input{Name: "pixels.png", Image: stagestest.ReadImage(rng, 3, 3, 3)}
		in <- []byte("not an image")
		in <- 42
		close(in)
	}()
	var got []string
	for s := range out {
		got = append(got, s.(string))
	}
	if len(got) != 23 {
		t.Fatalf("%d results: %v", len(got), got)
	}
	for i := 0; i < 20; i++ {
		if want := "#" + strconv.Itoa(i+1) + " ok #" + strconv.Itoa(i+1) + ".png"; got[i] != want {
			t.Errorf("result %d = %q, want %q", i, got[i], want)
		}
	}
	if got[20] != "pixels.png ok pixels.png" {
		t.Errorf("pixels: %q", got[20])
	}
	if !strings.HasPrefix(got[21], "#22 failed: decode: unknown image format") {
		t.Errorf("bad bytes: %q", got[21])
	}
	if !strings.HasPrefix(got[22], "#23 failed: flow: unsupported element type int") {
		t.Errorf("bad element: %q", got[22])
	}
	checkNoLeaks(t, base)
}

func TestFlowEncodesOutputs(t *testing.T) {
	f, err := New(context.Background(), pipeline.New().Decode().Transpose().Save("png"))
	if err != nil {
		t.Fatal(err)
	}
	m := stagestest.ReadImage(rand.New(rand.NewSource(11)), 7, 3, 3)
	go func() {
		f.In() <- m
		close(f.In())
	}()
	r := (<-f.Out()).(pipeline.Result)
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	back, err := stages.Decode(r.Encoded, stages.DecodeOptions{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := stages.NewImage(3, 7, 3)
	stages.Transpose(want, m)
	if stagestest.Diff(back, want) != "" {
		t.Error("encoded output differs")
	}
	if _, ok := <-f.Out(); ok {
		t.Error("Out not closed")
	}
}

func TestFlowPlanErrors(t *testing.T) {
	if _, err := New(context.Background(), pipeline.New().Grayscale()); err == nil || !strings.Contains(err.Error(), "must start with decode") {
		t.Errorf("got %v", err)
	}
}

// A cancelled flow closes Out and keeps draining In, so the upstream never blocks.
func TestFlowCancel(t *testing.T) {
	base := runtime.NumGoroutine()
	ctx, cancel := context.WithCancel(context.Background())
	f, err := New(ctx, pipeline.New().Decode())
	if err != nil {
		t.Fatal(err)
	}
	data := stagestest.Encode(t, stagestest.ReadImage(rand.New(rand.NewSource(12)), 4, 4, 3), "png")
	f.In() <- data
	<-f.Out()
	cancel()
	for range f.Out() {
	}
	for i := 0; i < 10; i++ {
		f.In() <- data // must not block
	}
	close(f.In())
	checkNoLeaks(t, base)
}
