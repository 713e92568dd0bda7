package bench

import (
	"strings"
	"testing"
)

func TestParseIntList(t *testing.T) {
	tests := []struct {
		in      string
		want    []int
		wantErr string
	}{
		{"2", []int{2}, ""},
		{"1,2,4,8", []int{1, 2, 4, 8}, ""},
		{" 8 , 1 ", []int{8, 1}, ""},
		{"", nil, "empty"},
		{"  ", nil, "empty"},
		{"0", nil, "out of range"},
		{"65", nil, "out of range"},
		{"-1", nil, "out of range"},
		{"a", nil, "not a whole number"},
		{"1,,2", nil, "not a whole number"},
		{"1.5", nil, "not a whole number"},
		{"2,4,2", nil, "listed twice"},
	}
	for _, tt := range tests {
		got, err := ParseList(tt.in, "streams") // streams: [1, 64]
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("ParseList(%q) error = %v, want one containing %q", tt.in, err, tt.wantErr)
			}
			continue
		}
		if err != nil || !equalInts(got, tt.want) {
			t.Errorf("ParseList(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
		}
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestParseFrameSize(t *testing.T) {
	tests := []struct {
		in      string
		w, h    int
		wantErr string
	}{
		{"1920x1080", 1920, 1080, ""},
		{"1X1", 1, 1, ""},
		{" 7x3 ", 7, 3, ""},
		{"10000x10000", 10000, 10000, ""},
		{"10001x10000", 0, 0, "over the limit"},
		{"0x10", 0, 0, "positive"},
		{"10x-1", 0, 0, "positive"},
		{"1920", 0, 0, "want WxH"},
		{"axb", 0, 0, "want WxH"},
		{"1920x1080x3", 0, 0, "want WxH"},
		{"", 0, 0, "want WxH"},
	}
	for _, tt := range tests {
		w, h, err := ParseSize(tt.in)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("ParseSize(%q) error = %v, want one containing %q", tt.in, err, tt.wantErr)
			}
			continue
		}
		if err != nil || w != tt.w || h != tt.h {
			t.Errorf("ParseSize(%q) = %d, %d, %v; want %d, %d", tt.in, w, h, err, tt.w, tt.h)
		}
	}
}
