package folderrun_test

import (
	"context"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"log"
	"os"
	"path/filepath"
	"strings"

	"github.com/imgpipe/imgpipe/pipeline"
	"github.com/imgpipe/imgpipe/pipeline/folderrun"
)

// A chain from a folder into a folder, with imgpipe run's guarantees: a second run into the
// same output folder while the first holds it is refused, and a run with resume skips what
// an earlier run did (the report, kept as a journal while a run goes, says what that was).
func Example() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "folderrun-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	in, out := filepath.Join(dir, "photos"), filepath.Join(dir, "out")
	if err := writePNGs(in, "a.png", "b.png"); err != nil {
		log.Fatal(err)
	}

	plan, err := pipeline.New().Decode().Grayscale().Save("png").Plan()
	if err != nil {
		log.Fatal(err)
	}
	exec := pipeline.DefaultExecution()
	exec.Device = "cpu"
	req := folderrun.Request{Plan: plan, Input: in, Output: out, Exec: exec}

	// The first run holds out/ from before its first input to after its report: a second
	// run started meanwhile is refused at once, saying why.
	first := req
	first.Starting = func(src pipeline.Source) pipeline.Source {
		_, err := folderrun.Run(ctx, req)
		_, why, _ := strings.Cut(err.Error(), "; ")
		fmt.Println("second run refused:", errors.As(err, new(*folderrun.RunError)), why)
		return src
	}
	sum, err := folderrun.Run(ctx, first)
	fmt.Println("first run:", sum.OK, "ok,", sum.Skipped, "skipped,", err)

	// With resume, what the first run did (its report says so, and its outputs are there)
	// is skipped.
	req.Exec.Resume = true
	sum, err = folderrun.Run(ctx, req)
	fmt.Println("resumed run:", sum.OK, "ok,", sum.Skipped, "skipped,", err)

	// Output:
	// second run refused: true wait for it to end, or choose another output folder
	// first run: 2 ok, 0 skipped, <nil>
	// resumed run: 0 ok, 2 skipped, <nil>
}

// writePNGs writes a small gradient PNG under each name into the folder dir, made first.
func writePNGs(dir string, names ...string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for i, name := range names {
		m := image.NewRGBA(image.Rect(0, 0, 8, 6))
		for y := range 6 {
			for x := range 8 {
				m.Set(x, y, color.RGBA{uint8(30 * x), uint8(40 * y), uint8(100 * i), 255})
			}
		}
		f, err := os.Create(filepath.Join(dir, name))
		if err != nil {
			return err
		}
		if err := errors.Join(png.Encode(f, m), f.Close()); err != nil {
			return err
		}
	}
	return nil
}
