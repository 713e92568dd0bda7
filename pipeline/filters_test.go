package pipeline

import (
	"strings"
	"testing"
	"time"
)

func TestReadPatterns(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
		err  string
	}{
		{"*.jpg\n\n# a comment\n  raw/**  \r\n#*.png\n", []string{"*.jpg", "raw/**"}, ""},
		{"", nil, ""},
		{"last line without newline", []string{"last line without newline"}, ""},
		{strings.Repeat("x", MaxPatternFile+1), nil, "not a pattern file"},
		{strings.Repeat("a\n", MaxPatternFile/2+1), nil, "not a pattern file"},
	} {
		got, err := ReadPatterns(strings.NewReader(tc.in))
		if (err == nil) != (tc.err == "") || (err != nil && !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("ReadPatterns(%.20q): error %v, want %q", tc.in, err, tc.err)
			continue
		}
		if strings.Join(got, "|") != strings.Join(tc.want, "|") {
			t.Errorf("ReadPatterns(%.20q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestParseSize(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64 // -1: an error
	}{
		{"500", 500 << 10}, {"0", 0}, {"100b", 100}, {"100B", 100}, {"100k", 100 << 10}, {"100K", 100 << 10},
		{"1.5M", 3 << 19}, {"2G", 2 << 30}, {"1T", 1 << 40}, {"1P", 1 << 50}, {"10MiB", 10 << 20}, {"10Mi", 10 << 20},
		{"10MB", 10 << 20}, {"10KiB", 10 << 10}, {" 7k ", 7 << 10},
		{"", -1}, {"k", -1}, {"B", -1}, {"-1", -1}, {"10x", -1}, {"10i", -1}, {"1e30", -1}, {"ten", -1},
	} {
		got, err := ParseSize(tc.in)
		if tc.want < 0 {
			if err == nil {
				t.Errorf("ParseSize(%q) = %d, want an error", tc.in, got)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", tc.in, got, err, tc.want)
		}
	}
}

func TestParseAge(t *testing.T) {
	now := time.Date(2026, 6, 15, 12, 0, 0, 0, time.UTC)
	day := 24 * time.Hour
	for _, tc := range []struct {
		in   string
		want time.Time // zero: an error
	}{
		{"3600", now.Add(-time.Hour)}, {"1.5h", now.Add(-90 * time.Minute)}, {"90m", now.Add(-90 * time.Minute)},
		{"30s", now.Add(-30 * time.Second)}, {"500ms", now.Add(-500 * time.Millisecond)}, {"2d", now.Add(-2 * day)},
		{"1w", now.Add(-7 * day)}, {"6M", now.Add(-180 * day)}, {"1y", now.Add(-365 * day)}, {"0", now},
		{"2026-01-02", time.Date(2026, 1, 2, 0, 0, 0, 0, time.Local)},
		{"2026-01-02T03:04:05Z", time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)},
		{"2026-01-02 03:04:05", time.Date(2026, 1, 2, 3, 4, 5, 0, time.Local)},
		{"", time.Time{}}, {"d", time.Time{}}, {"-1d", time.Time{}}, {"2x", time.Time{}}, {"2026-13-01", time.Time{}},
		{"1e30y", time.Time{}},
	} {
		got, err := ParseAge(tc.in, now)
		if tc.want.IsZero() {
			if err == nil {
				t.Errorf("ParseAge(%q) = %v, want an error", tc.in, got)
			}
			continue
		}
		if err != nil || !got.Equal(tc.want) {
			t.Errorf("ParseAge(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
}
