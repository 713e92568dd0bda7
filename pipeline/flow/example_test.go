package flow_test

import (
	"context"
	"fmt"

	"github.com/reugn/go-streams/extension"

	"github.com/imgpipe/imgpipe/pipeline"
	"github.com/imgpipe/imgpipe/pipeline/flow"
	"github.com/imgpipe/imgpipe/stages"
)

// gradient is a small test picture: R rises left to right, G top to bottom.
func gradient(w, h int) *stages.Image {
	m := stages.NewImage(w, h, 3)
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			p := m.Pix[y*m.Stride+3*x:]
			p[0], p[1], p[2] = byte(255*x/w), byte(255*y/h), 128
		}
	}
	return m
}

func ExampleNew() {
	p, err := pipeline.Parse("decode | grayscale | histogram")
	if err != nil {
		panic(err)
	}
	f, err := flow.New(context.Background(), p)
	if err != nil {
		panic(err)
	}
	in := make(chan any)
	out := make(chan any)
	go extension.NewChanSource(in).Via(f).To(extension.NewChanSink(out))
	go func() {
		in <- gradient(8, 8)
		in <- []byte("not an image")
		close(in)
	}()
	for item := range out {
		r := item.(pipeline.Result) // errors travel inside the items
		fmt.Println(r.Input, r.Status, r.Err)
	}
	// Output:
	// #1 ok <nil>
	// #2 failed decode: unknown image format
}
