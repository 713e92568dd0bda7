package pipeline_test

import (
	"context"
	"fmt"
	"image"
	"image/color"
	"os"
	"path/filepath"
	"strings"

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

	_, err = pipeline.ParseSpec("decode | blurr sigma=1.5 | save format=pgn")
	for _, e := range pipeline.Errors(err) {
		fmt.Println(e)
	}
	// Output:
	// decode | grayscale | blur sigma=1.5 | save format=png
	// col 10: unknown stage "blurr" (did you mean "blur"?)
	// col 40: save: format=pgn: want one of png, jpeg, webp, tiff, npy (did you mean "png"?)
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

// threshold is a custom Go stage: gray, then 255 where the gray level is at least level and 0
// elsewhere. It has no GPU kernel (GPU is nil), so a chain holding it runs on the CPU.
var threshold = &pipeline.StageDef{
	Name: "threshold",
	Kind: pipeline.PixelKind,
	Help: "gray level >= level: 255, else 0",
	Params: []pipeline.ParamSpec{
		{Name: "level", Kind: pipeline.Int, Default: int64(128), Range: &pipeline.Range{Min: 0, Max: 255},
			Help: "the lowest gray level that becomes white"},
	},
	// The output is one channel of the input's size, whatever the input's channels.
	Shape: func(in stages.Shape, _ pipeline.Params) (stages.Shape, bool) {
		return stages.Shape{W: in.W, H: in.H, C: 1}, false
	},
	// CPU binds the parameters once per run and returns the per-image function.
	CPU: func(p pipeline.Params) (pipeline.CPUFunc, error) {
		level := byte(p.Int("level"))
		return func(dst, src *stages.Image, _ *[256]uint64) {
			if src.C == 3 {
				stages.Grayscale(dst, src)
			} else {
				for y := 0; y < src.H; y++ {
					copy(dst.Row(y), src.Row(y))
				}
			}
			for y := 0; y < dst.H; y++ {
				row := dst.Row(y)
				for x, v := range row {
					if v >= level {
						row[x] = 255
					} else {
						row[x] = 0
					}
				}
			}
		}, nil
	},
}

func ExampleRegistry_Parse() {
	// The builtin stages plus threshold: specs parsed by reg may name any of them.
	reg, err := pipeline.NewRegistry(append(pipeline.Builtin.Stages(), threshold)...)
	if err != nil {
		panic(err)
	}
	p, err := reg.Parse("decode | blur sigma=0.8 | threshold level=100 | histogram")
	if err != nil {
		panic(err)
	}
	fmt.Println(p)

	// A disc on a dark background, from the standard library, as an in-memory input.
	disc := image.NewGray(image.Rect(0, 0, 16, 8))
	for y := 0; y < 8; y++ {
		for x := 0; x < 16; x++ {
			if dx, dy := float64(x)-7.5, 2*(float64(y)-3.5); dx*dx+dy*dy < 36 {
				disc.SetGray(x, y, color.Gray{Y: 200})
			}
		}
	}
	results := pipeline.Collect()
	if _, err := p.Run(context.Background(), pipeline.Inputs(pipeline.ImageInput("disc", disc)), results); err != nil {
		panic(err)
	}
	r := results.Results[0]
	out := r.Image.ToImage().(*image.Gray)
	for y := 0; y < out.Rect.Dy(); y++ {
		for x := 0; x < out.Rect.Dx(); x++ {
			fmt.Print(map[bool]string{true: "#", false: "."}[out.GrayAt(x, y).Y == 255])
		}
		fmt.Println()
	}
	fmt.Println(r.Histogram[255], "white,", r.Histogram[0], "black")

	// The builtin registry does not know threshold: the error goes on to list the stages
	// it knows.
	_, err = pipeline.Parse("decode | threshold")
	fmt.Println(strings.SplitN(err.Error(), " (", 2)[0])
	// Output:
	// decode | blur sigma=0.8 | threshold level=100 | histogram
	// ................
	// .....######.....
	// ...##########...
	// ..############..
	// ..############..
	// ...##########...
	// .....######.....
	// ................
	// 56 white, 72 black
	// col 10: unknown stage "threshold"
}
