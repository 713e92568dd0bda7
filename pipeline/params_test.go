package pipeline

import (
	"math"
	"testing"
)

func TestRangeString(t *testing.T) {
	for _, c := range []struct {
		r    Range
		want string
	}{
		{Range{Min: 0, Max: 32, MinOpen: true}, "(0, 32]"},
		{Range{Min: 1, Max: 1 << 40}, "[1, 1099511627776]"},
		{Range{Min: 0.25, Max: 1.5}, "[0.25, 1.5]"},
		{Range{Min: -math.MaxFloat32, Max: math.MaxFloat32}, "[-3.4028234663852886e+38, 3.4028234663852886e+38]"},
	} {
		if got := c.r.String(); got != c.want {
			t.Errorf("%+v: got %q, want %q", c.r, got, c.want)
		}
	}
}
