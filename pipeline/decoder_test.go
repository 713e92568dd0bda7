package pipeline

import (
	"context"
	"fmt"
	"math/rand"
	"sync"
	"testing"

	"github.com/imgpipe/imgpipe/stages"
	"github.com/imgpipe/imgpipe/stages/jpegturbo"
	"github.com/imgpipe/imgpipe/stages/stagestest"
)

// TestDecoderNamedAndNoticedOnce: every result names the decoder that made
// its pixels (and its report line carries it), and the decoder's note is
// given once per run, not per file.
func TestDecoderNamedAndNoticedOnce(t *testing.T) {
	rng := rand.New(rand.NewSource(3))
	var inputs []Input
	for i := range 6 {
		format := []string{"png", "jpeg"}[i%2]
		inputs = append(inputs, Input{Name: fmt.Sprintf("%d.%s", i, format), Data: stagestest.Encode(t, stagestest.ReadImage(rng, 20, 10, 3), format)})
	}
	turbo := map[bool]string{true: "turbo", false: "go"}[jpegturbo.Available() == nil]
	tests := []struct {
		spec     string
		wantJPEG string
	}{
		{"decode backend=go | grayscale", "go"},
		{"decode | grayscale", turbo}, // auto, the default
	}
	for _, tc := range tests {
		t.Run(tc.spec, func(t *testing.T) {
			plan := compileWith(t, Builtin, tc.spec)
			dec := *plan.Decode
			dec.Note = "a note about the decoder"
			plan.Decode = &dec
			var mu sync.Mutex
			var notes []string
			sink := Collect()
			opt := Options{Workers: 3, Notice: func(m string) { mu.Lock(); notes = append(notes, m); mu.Unlock() }}
			if _, err := Run(context.Background(), plan, Inputs(inputs...), sink, opt); err != nil {
				t.Fatal(err)
			}
			if len(notes) != 1 || notes[0] != dec.Note {
				t.Errorf("notices %q, want the decoder's note once", notes)
			}
			for _, r := range sink.Results {
				want := "go"
				if r.Input[len(r.Input)-4:] == "jpeg" {
					want = tc.wantJPEG
				}
				if r.Decoder != want || r.Line().Decoder != want {
					t.Errorf("%s: decoder %q (line %q), want %q", r.Input, r.Decoder, r.Line().Decoder, want)
				}
			}
		})
	}
}

// TestDecodeStageAutoResolvesOnce: the builtin decode stage resolves auto when
// it is bound, and only a fallback to Go gives a note.
func TestDecodeStageAutoResolvesOnce(t *testing.T) {
	plan := compileWith(t, Builtin, "decode")
	_, note := stages.ResolveJPEGBackend(stages.JPEGAuto)
	if plan.Decode.Note != note {
		t.Errorf("note %q, want %q", plan.Decode.Note, note)
	}
	if go_ := compileWith(t, Builtin, "decode backend=go"); go_.Decode.Note != "" {
		t.Errorf("backend=go has a note: %q", go_.Decode.Note)
	}
}
