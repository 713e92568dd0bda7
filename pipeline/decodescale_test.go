package pipeline

import (
	"strings"
	"testing"

	"github.com/imgpipe/imgpipe/stages"
)

// TestDecodeScaleCompile: a fixed scale is the decoder's for every image, auto takes the
// resize after decode (stages.AutoDCTScale per image), and auto without one is an error at
// decode's position.
func TestDecodeScaleCompile(t *testing.T) {
	thumb := stages.ResizeSpec{Width: 256, Height: 256, Fit: stages.FitCover, Filter: stages.FilterArea}
	for _, tc := range []struct {
		spec    string
		sizes   [][3]int // w, h, want denominator
		wantErr string
	}{
		// The default shrinks on load when a resize follows, and only then; scale=1 never.
		{spec: "decode | resize width=256", sizes: [][3]int{{4000, 3000, 8}, {300, 200, 1}}},
		{spec: "decode scale=1 | resize width=256", sizes: [][3]int{{4000, 3000, 1}}},
		{spec: "decode | grayscale | resize width=256", sizes: [][3]int{{4000, 3000, 1}}},
		{spec: "decode", sizes: [][3]int{{4000, 3000, 1}}},
		{spec: "decode scale=1/4 | grayscale", sizes: [][3]int{{4000, 3000, 4}, {10, 10, 4}}},
		{spec: "decode scale=1/8 | resize width=256", sizes: [][3]int{{100, 100, 8}}},
		{spec: "decode scale=auto | resize width=256 height=256 fit=inside", sizes: [][3]int{{4000, 3000, 8}, {3000, 4000, 8}, {1000, 700, 2}, {300, 200, 1}}},
		{spec: "decode scale=auto | resize width=256 height=256 fit=cover filter=area",
			sizes: [][3]int{{4000, 2000, stages.AutoDCTScale(thumb, 4000, 2000)}, {800, 800, 2}}},
		{spec: "decode scale=auto | grayscale | resize width=256", wantErr: "col 1: decode scale=auto needs a resize right after it"},
		{spec: "decode scale=auto", wantErr: "decode scale=auto needs a resize right after it"},
		{spec: "decode scale=1/3 | resize width=256", wantErr: "1/3"},
	} {
		t.Run(tc.spec, func(t *testing.T) {
			steps, err := Builtin.ParseSpec(tc.spec)
			var plan *Plan
			if err == nil {
				plan, err = Builtin.Compile(steps)
			}
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range tc.sizes {
				got := 1
				if plan.Decode.Scale != nil {
					got = plan.Decode.Scale(s[0], s[1])
				}
				if got != s[2] {
					t.Errorf("%dx%d: scale 1/%d, want 1/%d", s[0], s[1], got, s[2])
				}
			}
		})
	}
}
