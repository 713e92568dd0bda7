package bench_test

import (
	"context"
	"fmt"
	"image"
	"image/png"
	"os"
	"path/filepath"

	"github.com/imgpipe/imgpipe/bench"
	"github.com/imgpipe/imgpipe/pipeline"
)

// Serve loads an engine opened in the process, on the CPU, with two clients sending the
// photos of a folder; the report's counts are exact, its rates and latencies measured.
func ExampleServe() {
	dir, err := os.MkdirTemp("", "photos-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	f, err := os.Create(filepath.Join(dir, "a.png"))
	if err != nil {
		panic(err)
	}
	png.Encode(f, image.NewGray(image.Rect(0, 0, 64, 48)))
	f.Close()

	exec := pipeline.DefaultExecution()
	exec.Device = "cpu"
	rep, err := bench.Serve(context.Background(), bench.ServeConfig{Dir: dir, Exec: exec,
		Spec: "decode | resize width=16 height=16 fit=inside | save format=jpeg quality=75", Clients: 2, Requests: 10})
	if err != nil {
		panic(err)
	}
	fmt.Println(rep.Target, rep.Device, rep.Photos, rep.Saturated.OK, "of", rep.Saturated.Requests, "ok")
	// Output: in-process cpu 1 10 of 10 ok
}

// ServeConfig.Check names every bad setting at once.
func ExampleServeConfig_Check() {
	c := bench.ServeConfig{Dir: "photos", Clients: 0, Requests: 100, Load: []float64{0.5, 1.2}, Get: "http://127.0.0.1:8081/x"}
	fmt.Println(c.Check())
	// Output:
	// --get "http://127.0.0.1:8081/x": the template has no {name}
	// --clients 0 out of range [1, 10000]
	// --load 1.2: each fraction is in (0, 1]
}
