package engine_test

import (
	"bytes"
	"context"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"log"

	"github.com/imgpipe/imgpipe/engine"
	"github.com/imgpipe/imgpipe/pipeline"
)

// A web service opens one engine when it starts, and closes it when it stops: Close lets
// the requests in flight finish.
func ExampleOpen() {
	exec := pipeline.DefaultExecution()
	exec.Device = "cpu" // "auto" uses a GPU when there is one
	e, err := engine.Open(engine.Config{Exec: exec})
	if err != nil {
		log.Fatal(err)
	}
	defer e.Close()
	fmt.Println(e.Device())
	// Output: cpu
}

// Each request is one image through a chain; concurrent requests of the same chain share
// its resident run, and on a GPU its device batches.
func ExampleEngine_Process() {
	exec := pipeline.DefaultExecution()
	exec.Device = "cpu"
	e, err := engine.Open(engine.Config{Exec: exec})
	if err != nil {
		log.Fatal(err)
	}
	defer e.Close()
	plan, err := pipeline.CompileSpec("decode | resize width=64 height=64 fit=inside | save format=png")
	if err != nil {
		log.Fatal(err)
	}
	res, err := e.Process(context.Background(), plan, pipeline.Input{Name: "upload.png", Data: photo(320, 200)})
	if err != nil {
		log.Fatal(err) // the engine's: busy, closed, the caller left, a device fault
	}
	if res.Status != pipeline.StatusOK {
		log.Fatal(res.Err) // the input's own failure: a corrupt file, too many pixels
	}
	thumb, err := png.Decode(bytes.NewReader(res.Encoded))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.Output, thumb.Bounds().Dx(), "x", thumb.Bounds().Dy())
	// Output: upload.png 64 x 40
}

// photo is a w×h PNG of a gradient.
func photo(w, h int) []byte {
	m := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			m.Set(x, y, color.RGBA{uint8(x), uint8(y), 128, 255})
		}
	}
	var b bytes.Buffer
	if err := png.Encode(&b, m); err != nil {
		log.Fatal(err)
	}
	return b.Bytes()
}
