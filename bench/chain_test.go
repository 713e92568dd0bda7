package bench

import (
	"testing"

	"github.com/imgpipe/imgpipe/stages"
)

func TestParseBenchChain(t *testing.T) {
	c, err := ParseChain(DefaultChain(1.5))
	if err != nil {
		t.Fatal(err)
	}
	if c.Label != "grayscale|blur1.5|transpose|histogram" || len(c.Ops) != 4 {
		t.Errorf("default chain: label %q, %d ops", c.Label, len(c.Ops))
	}
	if c, err := ParseChain("boxblur radius=2 | grayscale"); err != nil || c.Label != "boxblur2|grayscale" {
		t.Errorf("boxblur chain: %v, %v", c, err)
	}
	if c, err := ParseChain(DefaultChain(2)); err != nil || c.Label != "grayscale|blur2|transpose|histogram" {
		t.Errorf("sigma 2 label: %v, %v", c, err)
	}
	for _, bad := range []string{"", "decode | grayscale", "grayscale | save", "blur sigma=99", "grayscale | nosuch", "histogram | histogram"} {
		if _, err := ParseChain(bad); err == nil {
			t.Errorf("ParseChain(%q) succeeded, want an error", bad)
		}
	}
}

func TestCPUChainMatchesStages(t *testing.T) {
	c, err := ParseChain(DefaultChain(1.5))
	if err != nil {
		t.Fatal(err)
	}
	pool := RandomPool(13, 7, 1, 9)
	src := pool.image(0)
	got, hist := c.newCPU().run(src)
	// The chain by hand, with package stages.
	g := stages.NewImage(13, 7, 1)
	stages.Grayscale(g, src)
	b := stages.NewImage(13, 7, 1)
	stages.Blur(b, g, stages.BlurTaps(1.5))
	tr := stages.NewImage(7, 13, 1)
	stages.Transpose(tr, b)
	var want [256]uint64
	stages.Histogram(&want, tr)
	if err := sameImage(got, tr); err != nil {
		t.Error(err)
	}
	if *hist != want {
		t.Error("histogram differs")
	}
	if pool.image(0).Pix[0] != src.Pix[0] || got.W != 7 {
		t.Error("the source frame was changed")
	}
	// A different frame gives a different result: the comparison can fail.
	other := RandomPool(13, 7, 1, 10).image(0)
	got2, _ := c.newCPU().run(other)
	if sameImage(got2, tr) == nil {
		t.Error("two random frames gave the same output")
	}
}
