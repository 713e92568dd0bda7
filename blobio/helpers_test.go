package blobio

import (
	"bytes"
	"image"
	"image/png"
	"testing"

	"github.com/imgpipe/imgpipe/pipeline"
)

func mustSpec(t *testing.T, spec string) []pipeline.Step {
	t.Helper()
	steps, err := pipeline.ParseSpec(spec)
	if err != nil {
		t.Fatal(err)
	}
	return steps
}

func pngOf(t *testing.T) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := png.Encode(&b, image.NewRGBA(image.Rect(0, 0, 3, 2))); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}
