// Package selectflags holds the input selection flags of imgpipe run, spelt as rclone's
// filter flags, and turns them into a pipeline.Selection.
package selectflags

import (
	"fmt"
	"os"
	"time"

	"github.com/spf13/pflag"

	"github.com/imgpipe/imgpipe/pipeline"
)

// Flags are the values of the selection flags.
type Flags struct {
	include, exclude, includeFrom, excludeFrom, ext []string
	minSize, maxSize, maxAge, minAge                string
}

// Any reports whether any selection flag is set.
func (f *Flags) Any() bool {
	return len(f.include)+len(f.exclude)+len(f.includeFrom)+len(f.excludeFrom)+len(f.ext) > 0 ||
		f.minSize+f.maxSize+f.maxAge+f.minAge != ""
}

// Register adds the selection flags to fs.
func (f *Flags) Register(fs *pflag.FlagSet) {
	fs.StringArrayVar(&f.include, "include", nil, "take only inputs matching `GLOB`: without '/' it matches the file name at any depth (*.jpg), with '/' the path from the input root (raw/**) (repeatable)")
	fs.StringArrayVar(&f.exclude, "exclude", nil, "drop inputs matching `GLOB`, by the same rule (repeatable; wins over --include)")
	fs.StringArrayVar(&f.includeFrom, "include-from", nil, "--include each pattern of `FILE`: one a line, # comments and blank lines ignored (repeatable)")
	fs.StringArrayVar(&f.excludeFrom, "exclude-from", nil, "--exclude each pattern of `FILE` (repeatable)")
	fs.StringSliceVar(&f.ext, "ext", nil, "take only these extensions, e.g. jpg,png (default: every format decode reads)")
	fs.StringVar(&f.minSize, "min-size", "", "take only files of at least `SIZE` (KiB, or with a suffix B, K, M, G: 100k, 1.5M)")
	fs.StringVar(&f.maxSize, "max-size", "", "take only files of at most `SIZE`")
	fs.StringVar(&f.maxAge, "max-age", "", "take only files modified less than `AGE` ago (seconds, or with a suffix m, h, d, w, M, y: 90m, 2d; or a date 2006-01-02)")
	fs.StringVar(&f.minAge, "min-age", "", "take only files modified more than `AGE` ago")
}

// Selection is what the flags select, with ages counted back from now; it reports every
// bad value and unreadable pattern file at once (the patterns themselves are checked by
// Selection.Check).
func (f *Flags) Selection(now time.Time) (pipeline.Selection, error) {
	sel := pipeline.Selection{Include: f.include, Exclude: f.exclude, Exts: f.ext}
	var errs []error
	add := func(flag string, files []string, to *[]string) {
		for _, name := range files {
			pats, err := readPatterns(name)
			if err != nil {
				errs = append(errs, fmt.Errorf("--%s %s: %w", flag, name, err))
			}
			*to = append(*to, pats...)
		}
	}
	add("include-from", f.includeFrom, &sel.Include)
	add("exclude-from", f.excludeFrom, &sel.Exclude)
	for _, v := range []struct {
		flag, value string
		size        *int64
		at          *time.Time
	}{{"min-size", f.minSize, &sel.MinSize, nil}, {"max-size", f.maxSize, &sel.MaxSize, nil},
		{"max-age", f.maxAge, nil, &sel.ModifiedAfter}, {"min-age", f.minAge, nil, &sel.ModifiedBefore}} {
		var err error
		switch {
		case v.value == "":
		case v.size != nil:
			*v.size, err = pipeline.ParseSize(v.value)
		default:
			*v.at, err = pipeline.ParseAge(v.value, now)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("--%s %w", v.flag, err))
		}
	}
	if len(errs) > 0 {
		return sel, pipeline.ErrorList(errs)
	}
	return sel, nil
}

func readPatterns(name string) ([]string, error) {
	file, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer file.Close()
	return pipeline.ReadPatterns(file)
}
