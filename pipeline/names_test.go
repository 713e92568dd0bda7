package pipeline_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/imgpipe/imgpipe/pipeline"
)

func ExampleRename() {
	src := pipeline.Rename(pipeline.Inputs(
		pipeline.Input{Name: "a.jpg"},
		pipeline.Input{Name: "raw/b.png", OutStem: "raw/b.png"}, // kept its extension by the clash rule
	), "{stem}_256.{ext}")
	for {
		in, err := src.Next(context.Background())
		if errors.Is(err, io.EOF) {
			break
		}
		fmt.Println(in.OutputName("jpg"))
	}
	fmt.Println(pipeline.CheckNameTemplate("{stem}.png"))
	// Output:
	// a_256.jpg
	// raw/b.png_256.jpg
	// name template "{stem}.png": end it with .{ext}, the save format's extension
}

func ExampleReadNullList() {
	paths, _ := pipeline.ReadNullList(strings.NewReader("a b.jpg\x00new\nline.png\x00"))
	fmt.Printf("%q\n", paths)
	_, err := pipeline.ReadFileList(strings.NewReader("a.jpg\x00b.jpg\x00"))
	fmt.Println(err)
	// Output:
	// ["a b.jpg" "new\nline.png"]
	// file list: line 1 holds a NUL byte: for a NUL-separated list (find -print0) give -0/--null
}

// TestParamApplies: a parameter given where its stage ignores it is an error naming it, in
// a spec, a job's text values and Go values alike; one that applies is accepted.
func TestParamApplies(t *testing.T) {
	save, _ := pipeline.Builtin.Lookup("save")
	for _, tc := range []struct {
		args map[string]any
		want string // "" for none
	}{
		{map[string]any{"quality": 80}, "save: quality=80 has no effect with the default format=png (it applies to format=jpeg|webp only); drop it"},
		{map[string]any{"format": "jpeg", "quality": 80}, ""},
		{map[string]any{"format": "webp", "quality": 80}, ""},
		{map[string]any{"format": "webp", "lossless": true, "quality": 80}, "quality=80 has no effect with lossless=true"},
		{map[string]any{"format": "jpeg", "lossless": false}, "lossless=false has no effect with format=jpeg"},
		{map[string]any{"format": "tiff", "compression": "0"}, ""},
		{map[string]any{"format": "npy", "compression": "9"}, "compression=9 has no effect with format=npy"},
	} {
		_, err := pipeline.NewParams(save, tc.args)
		text := map[string]string{}
		for k, v := range tc.args {
			text[k] = fmt.Sprint(v)
		}
		_, perr := pipeline.ParseParams(save, text, nil)
		for _, e := range []error{err, perr} {
			if tc.want == "" && e != nil || tc.want != "" && (e == nil || !strings.Contains(e.Error(), tc.want)) {
				t.Errorf("%v: %v, want %q", tc.args, e, tc.want)
			}
		}
	}
	bad := &pipeline.StageDef{Name: "x", Kind: pipeline.SinkKind, Help: "x", NewEncoder: func(pipeline.Params) (*pipeline.Encoder, error) { return nil, nil },
		Params: []pipeline.ParamSpec{{Name: "a", Kind: pipeline.Int, Default: int64(0), Help: "a", AppliesIf: []pipeline.ParamIf{{Param: "b", Values: []string{"1"}}}}}}
	if _, err := pipeline.NewRegistry(bad); err == nil || !strings.Contains(err.Error(), "applies if b") {
		t.Errorf("a condition on no parameter: %v", err)
	}
}
