package pipeline

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
)

// MaxPatternFile bounds a pattern file (--include-from, --exclude-from): a list of globs,
// not a data set; a larger file is more likely the wrong file than a filter.
const MaxPatternFile = 1 << 20

// ReadPatterns reads a pattern file as rclone's --include-from does: one glob a line,
// surrounding spaces trimmed, blank lines and lines starting with '#' ignored. A file over
// MaxPatternFile bytes is an error.
func ReadPatterns(r io.Reader) ([]string, error) {
	b, err := io.ReadAll(io.LimitReader(r, MaxPatternFile+1))
	if err != nil {
		return nil, err
	}
	if len(b) > MaxPatternFile {
		return nil, fmt.Errorf("over %d bytes: not a pattern file", MaxPatternFile)
	}
	var pats []string
	for _, l := range strings.Split(string(b), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			pats = append(pats, l)
		}
	}
	return pats, nil
}

// sizeLetters are ParseSize's multiplier letters, KiB to PiB: binary, as rclone's.
const sizeLetters = "kmgtp"

// ParseSize reads a size as rclone's --min-size does: a number in KiB, or with a suffix
// B, K, M, G, T or P (binary multiples; "KiB", "Mi" and "MB" say the same): "500", "1.5M".
func ParseSize(s string) (int64, error) {
	num, bytes := strings.CutSuffix(strings.ToLower(strings.TrimSpace(s)), "b")
	if n := len(num); n >= 2 && num[n-1] == 'i' && strings.IndexByte(sizeLetters, num[n-2]) >= 0 {
		num = num[:n-1]
	}
	unit := int64(1 << 10) // rclone's default unit
	if bytes {
		unit = 1
	}
	if n := len(num); n > 0 {
		if i := strings.IndexByte(sizeLetters, num[n-1]); i >= 0 {
			unit, num = 1<<(10*(i+1)), num[:n-1]
		}
	}
	v, err := strconv.ParseFloat(num, 64)
	if err != nil || v < 0 || v*float64(unit) > float64(1<<62) {
		return 0, fmt.Errorf("%q: want a size such as 500 (KiB), 100k, 1.5M or 2G", s)
	}
	return int64(v * float64(unit)), nil
}

// ageUnits are ParseAge's suffixes, as rclone's; a month is 30 days, a year 365.
var ageUnits = []struct {
	suffix string
	d      time.Duration
}{
	{"ms", time.Millisecond}, {"s", time.Second}, {"m", time.Minute}, {"h", time.Hour},
	{"d", 24 * time.Hour}, {"w", 7 * 24 * time.Hour}, {"M", 30 * 24 * time.Hour}, {"y", 365 * 24 * time.Hour},
}

// ageLayouts are the absolute times ParseAge takes.
var ageLayouts = []string{time.RFC3339, "2006-01-02T15:04:05", "2006-01-02 15:04:05", "2006-01-02"}

// ParseAge reads an age as rclone's --max-age does and returns the time that far before
// now: a number of seconds, or with a suffix ms, s, m, h, d, w, M or y ("90m", "2d", "1y");
// or an absolute time, 2006-01-02 or RFC 3339 (local time without a zone).
func ParseAge(s string, now time.Time) (time.Time, error) {
	t := strings.TrimSpace(s)
	for _, layout := range ageLayouts {
		if at, err := time.ParseInLocation(layout, t, time.Local); err == nil {
			return at, nil
		}
	}
	unit := time.Second
	for _, u := range ageUnits {
		if num, ok := strings.CutSuffix(t, u.suffix); ok {
			unit, t = u.d, num
			break
		}
	}
	v, err := strconv.ParseFloat(t, 64)
	if err != nil || v < 0 || v*float64(unit) > float64(1<<62) {
		return time.Time{}, fmt.Errorf("%q: want an age such as 3600 (seconds), 90m, 2d, 1w, 6M, 1y, or a date 2006-01-02", s)
	}
	return now.Add(-time.Duration(v * float64(unit))), nil
}
