package pipeline_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/imgpipe/imgpipe/pipeline"
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

func ExampleParseSpec() {
	steps, err := pipeline.ParseSpec("decode | grayscale | blur sigma=1.50 | save format=png")
	if err != nil {
		panic(err)
	}
	fmt.Println(pipeline.FormatSpec(steps))

	_, err = pipeline.ParseSpec("decode | blurr sigma=1.5 | save format=gif")
	for _, e := range pipeline.Errors(err) {
		fmt.Println(e)
	}
	// Output:
	// decode | grayscale | blur sigma=1.5 | save format=png
	// col 10: unknown stage "blurr" (did you mean "blur"?)
	// col 40: save: format=gif: want one of png, jpeg
}

func ExampleNew() {
	p := pipeline.New().Decode().Grayscale().Blur(1.5).Transpose().Histogram()
	results := pipeline.Collect()
	sum, err := p.Run(context.Background(), pipeline.Inputs(
		pipeline.Input{Name: "gradient", Image: gradient(64, 48)},
	), results)
	if err != nil {
		panic(err)
	}
	r := results.Results[0]
	var n uint64
	for _, c := range r.Histogram {
		n += c
	}
	fmt.Printf("%s: %s, %dx%d in, %dx%dx%d out, histogram of %d pixels\n",
		r.Input, r.Status, r.Width, r.Height, r.Image.W, r.Image.H, r.Image.C, n)
	fmt.Println(sum.OK, "ok,", sum.Failed, "failed")
	// Output:
	// gradient: ok, 64x48 in, 48x64x1 out, histogram of 3072 pixels
	// 1 ok, 0 failed
}

func ExampleRun() {
	in, _ := os.MkdirTemp("", "imgpipe-example-in")
	out, _ := os.MkdirTemp("", "imgpipe-example-out")
	defer os.RemoveAll(in)
	defer os.RemoveAll(out)
	for _, name := range []string{"a.png", "sub/b.png", "notes.txt"} {
		os.MkdirAll(filepath.Join(in, filepath.Dir(name)), 0o755)
		f, _ := os.Create(filepath.Join(in, name))
		stages.Encode(f, gradient(32, 16), stages.SaveOptions{Format: "png"})
		f.Close()
	}

	steps, _ := pipeline.ParseSpec("decode | boxblur radius=2 | save format=jpeg quality=90")
	plan, err := pipeline.Compile(steps)
	if err != nil {
		panic(err)
	}
	sum, err := pipeline.Run(context.Background(), plan, pipeline.Folder(in, out), pipeline.ToFolder(out),
		pipeline.Options{Workers: 2, Progress: func(r *pipeline.Result) {
			fmt.Println(r.Input, "->", r.Output, r.Status)
		}})
	if err != nil {
		panic(err)
	}
	fmt.Println(sum.OK, "ok")
	// Output:
	// a.png -> a.jpg ok
	// sub/b.png -> sub/b.jpg ok
	// 2 ok
}
