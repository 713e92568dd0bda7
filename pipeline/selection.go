package pipeline

import (
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/bmatcuk/doublestar/v4"
)

// Selection picks which files are a run's inputs, by extension and by glob patterns on
// their relative, slash-separated path (as the report names them). The zero Selection takes
// every file with one of DefaultExts.
type Selection struct {
	// Exts are the extensions taken, without the dot, compared without case; empty means
	// DefaultExts.
	Exts []string
	// Include, when not empty, takes only paths that match at least one pattern.
	Include []string
	// Exclude drops paths that match any pattern; it wins over Include.
	Exclude []string
}

// DefaultExts are the extensions of the formats decode reads, taken when no --ext is given.
var DefaultExts = []string{"jpg", "jpeg", "png", "gif", "bmp", "tif", "tiff", "webp"}

// IsImageName reports whether a file name has one of DefaultExts, in any case.
func IsImageName(name string) bool {
	return slices.Contains(DefaultExts, strings.ToLower(strings.TrimPrefix(path.Ext(name), ".")))
}

// Check reports every bad pattern and extension of s at once. A pattern is a glob of
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

func match(pattern, rel string) bool {
	ok, err := doublestar.Match(pattern, rel)
	return err == nil && ok
}
