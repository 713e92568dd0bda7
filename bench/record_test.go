package bench

import (
	"testing"
	"time"
)

func TestMedian(t *testing.T) {
	ms := func(v ...int) []time.Duration {
		var d []time.Duration
		for _, x := range v {
			d = append(d, time.Duration(x)*time.Millisecond)
		}
		return d
	}
	if got := median(ms(5, 1, 3)); got != 3*time.Millisecond {
		t.Errorf("odd median = %v", got)
	}
	if got := median(ms(4, 1, 3, 2)); got != 2500*time.Microsecond {
		t.Errorf("even median = %v", got)
	}
	if got := median(nil); got != 0 {
		t.Errorf("empty median = %v", got)
	}
	if got := medianIndex(ms(5, 1, 3)); got != 2 {
		t.Errorf("medianIndex = %d, want 2", got)
	}
	if got := medianIndex(ms(9)); got != 0 {
		t.Errorf("medianIndex of one = %d", got)
	}
}
