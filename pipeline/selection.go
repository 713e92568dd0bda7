package pipeline

import (
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/bmatcuk/doublestar/v4"
)

// Selection picks which files are a run's inputs, by extension, by glob patterns on their
// relative, slash-separated path (as the report names them), and by size and age. A pattern
// without '/' matches the file's base name at any depth ("*.jpg" takes a/b/c.jpg, as in
// rclone); one with '/' matches the whole relative path from the input root ("raw/*.jpg",
// "2024/**"; a leading '/' only anchors, "/a.jpg" is the top-level a.jpg). The zero
// Selection takes every file with one of DefaultExts.
type Selection struct {
	// Exts are the extensions taken, without the dot, compared without case; empty means
	// DefaultExts.
	Exts []string
	// Include, when not empty, takes only paths that match at least one pattern.
	Include []string
	// Exclude drops paths that match any pattern; it wins over Include.
	Exclude []string
	// MinSize and MaxSize, when not zero, take only files of at least and at most so many
	// bytes.
	MinSize, MaxSize int64
	// ModifiedAfter and ModifiedBefore, when not zero, take only files last modified after
	// and before these times (--max-age and --min-age, resolved at the run's start).
	ModifiedAfter, ModifiedBefore time.Time
}

// DefaultExts are the extensions of the formats decode reads, taken when no --ext is given.
var DefaultExts = []string{"jpg", "jpeg", "png", "gif", "bmp", "tif", "tiff", "webp"}

// IsImageName reports whether a file name has one of DefaultExts, in any case.
func IsImageName(name string) bool {
	return slices.Contains(DefaultExts, strings.ToLower(strings.TrimPrefix(path.Ext(name), ".")))
}

// Check reports every bad pattern, extension and bound of s at once. A pattern is a glob of
// path.Match's syntax (* ? [...] and \ escapes, '*' not crossing '/'), with '**' as a
// whole path component for any number of folders, and {a,b} alternatives: "**/*.jpg",
// "raw/**", "2024-*/{a,b}/*.png". An extension is letters and digits ("jpg", or ".jpg").
func (s Selection) Check() error {
	var errs []error
	for _, list := range []struct {
		flag string
		pats []string
	}{{"include", s.Include}, {"exclude", s.Exclude}} {
		for _, p := range list.pats {
			if p == "" || !doublestar.ValidatePattern(p) {
				errs = append(errs, fmt.Errorf("--%s %q: not a valid glob (use * ? [..] {a,b} and ** for any folders)", list.flag, p))
			}
		}
	}
	for _, e := range s.Exts {
		e = strings.TrimPrefix(e, ".")
		if e == "" || strings.ContainsAny(e, "/\\.*?[") {
			errs = append(errs, fmt.Errorf("--ext %q: want an extension such as jpg", e))
		}
	}
	if s.MinSize < 0 || s.MaxSize < 0 || (s.MaxSize > 0 && s.MinSize > s.MaxSize) {
		errs = append(errs, fmt.Errorf("--min-size %d, --max-size %d: want sizes of 0 or more, the minimum not over the maximum", s.MinSize, s.MaxSize))
	}
	if !s.ModifiedAfter.IsZero() && !s.ModifiedBefore.IsZero() && !s.ModifiedAfter.Before(s.ModifiedBefore) {
		errs = append(errs, errors.New("--max-age and --min-age select no time: --max-age must be the longer"))
	}
	if len(errs) > 0 {
		return ErrorList(errs)
	}
	return nil
}

// Takes reports whether the file at the relative slash path rel is selected. s must have
// passed Check (a bad pattern matches nothing).
func (s Selection) Takes(rel string) bool {
	ext := strings.ToLower(strings.TrimPrefix(path.Ext(rel), "."))
	exts := DefaultExts
	if len(s.Exts) > 0 {
		exts = s.Exts
	}
	if !slices.ContainsFunc(exts, func(e string) bool { return strings.EqualFold(strings.TrimPrefix(e, "."), ext) }) {
		return false
	}
	if len(s.Include) > 0 && !slices.ContainsFunc(s.Include, func(p string) bool { return match(p, rel) }) {
		return false
	}
	return !slices.ContainsFunc(s.Exclude, func(p string) bool { return match(p, rel) })
}

// ByInfo reports whether s selects by size or age, so that a caller must pass TakesInfo
// what it knows of a file.
func (s Selection) ByInfo() bool {
	return s.MinSize > 0 || s.MaxSize > 0 || !s.ModifiedAfter.IsZero() || !s.ModifiedBefore.IsZero()
}

// TakesInfo reports whether a file of size bytes last modified at mod passes the size and
// age filters of s (Takes decides on its name).
func (s Selection) TakesInfo(size int64, mod time.Time) bool {
	return (s.MinSize <= 0 || size >= s.MinSize) && (s.MaxSize <= 0 || size <= s.MaxSize) &&
		(s.ModifiedAfter.IsZero() || mod.After(s.ModifiedAfter)) &&
		(s.ModifiedBefore.IsZero() || mod.Before(s.ModifiedBefore))
}

// match applies one pattern to rel, by the rule of Selection: a pattern without '/'
// matches the base name, one with '/' the whole path.
func match(pattern, rel string) bool {
	if !strings.Contains(pattern, "/") {
		rel = path.Base(rel)
	}
	ok, err := doublestar.Match(strings.TrimPrefix(pattern, "/"), rel)
	return err == nil && ok
}
