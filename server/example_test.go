package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image"
	"image/png"
	"log"
	"net/http"
	"net/http/httptest"
	"net/url"

	"github.com/imgpipe/imgpipe/engine"
	"github.com/imgpipe/imgpipe/pipeline"
	"github.com/imgpipe/imgpipe/server"
)

// openEngine opens an engine on the CPU.
func openEngine() *engine.Engine {
	exec := pipeline.DefaultExecution()
	exec.Device = "cpu"
	eng, err := engine.Open(engine.Config{Exec: exec})
	if err != nil {
		log.Fatal(err)
	}
	return eng
}

// photo is a 64×48 PNG.
func photo() []byte {
	var b bytes.Buffer
	if err := png.Encode(&b, image.NewGray(image.Rect(0, 0, 64, 48))); err != nil {
		log.Fatal(err)
	}
	return b.Bytes()
}

// A server on an engine, behind a token, answering a thumbnail request. imgpipe serve
// listens on server.DefaultListen; a test server stands in for it here.
func ExampleNew() {
	eng := openEngine()
	defer eng.Close()
	srv, err := server.New(eng, server.Config{Token: "secret"})
	if err != nil {
		log.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	defer ts.Close()

	spec := "decode | resize width=32 height=32 fit=inside | save format=png"
	req, err := http.NewRequest(http.MethodPost, ts.URL+"/v1/process?p="+url.QueryEscape(spec), bytes.NewReader(photo()))
	if err != nil {
		log.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer secret")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		log.Fatal(err)
	}
	resp.Body.Close()
	var line pipeline.ReportLine
	if err := json.Unmarshal([]byte(resp.Header.Get(server.ReportHeader)), &line); err != nil {
		log.Fatal(err)
	}
	fmt.Println(resp.StatusCode, resp.Header.Get("Content-Type"))
	fmt.Println(line.Input, line.Status, line.Width, line.Height)

	// SIGTERM's part: refuse new work, finish what is in progress.
	if err := srv.Shutdown(context.Background()); err != nil {
		log.Fatal(err)
	}
	// Output:
	// 200 image/png
	// request ok 64 48
}

// The Go client: a processed image, and a server's refusal as a *server.StatusError.
func ExampleClient() {
	eng := openEngine()
	defer eng.Close()
	srv, err := server.New(eng, server.Config{})
	if err != nil {
		log.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	defer ts.Close()

	c := &server.Client{URL: ts.URL}
	ctx := context.Background()
	out, err := c.Process(ctx, "decode | resize width=32 height=32 fit=inside | save format=png", bytes.NewReader(photo()))
	if err != nil {
		log.Fatal(err)
	}
	m, err := png.Decode(bytes.NewReader(out.Data))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(out.ContentType, m.Bounds().Dx(), "x", m.Bounds().Dy())

	_, err = c.Submit(ctx, []byte("input: {dir: photos}\npipeline: decode | save\noutput: {dir: thumbs}\n"))
	fmt.Println(err)
	// Output:
	// image/png 32 x 24
	// server: 403 Forbidden: jobs need --allow-root: this server has no folder it may read or write
}
