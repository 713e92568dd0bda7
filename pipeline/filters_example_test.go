package pipeline_test

import (
	"fmt"
	"strings"
	"time"

	"github.com/imgpipe/imgpipe/pipeline"
)

// A pattern without '/' matches the file name at any depth; one with '/' the whole path.
func ExampleSelection_Takes() {
	sel := pipeline.Selection{Include: []string{"*.jpg", "raw/**"}, Exclude: []string{"*Storm*"}}
	for _, rel := range []string{"a.jpg", "2024/x/b.jpg", "2024/Storm_1.jpg", "raw/deep/c.png", "x/raw/d.png"} {
		fmt.Println(rel, sel.Takes(rel))
	}
	// Output:
	// a.jpg true
	// 2024/x/b.jpg true
	// 2024/Storm_1.jpg false
	// raw/deep/c.png true
	// x/raw/d.png false
}

func ExampleReadPatterns() {
	pats, err := pipeline.ReadPatterns(strings.NewReader("# thumbnails\n*_thumb.*\n\nraw/**\n"))
	fmt.Println(pats, err)
	// Output: [*_thumb.* raw/**] <nil>
}

func ExampleParseSize() {
	for _, s := range []string{"500", "100k", "1.5M", "2G", "64B"} {
		n, _ := pipeline.ParseSize(s)
		fmt.Println(s, n)
	}
	// Output:
	// 500 512000
	// 100k 102400
	// 1.5M 1572864
	// 2G 2147483648
	// 64B 64
}

func ExampleParseAge() {
	now := time.Date(2026, 6, 15, 12, 0, 0, 0, time.UTC)
	for _, s := range []string{"90m", "2d", "1w"} {
		at, _ := pipeline.ParseAge(s, now)
		fmt.Println(s, at.Format(time.RFC3339))
	}
	// Output:
	// 90m 2026-06-15T10:30:00Z
	// 2d 2026-06-13T12:00:00Z
	// 1w 2026-06-08T12:00:00Z
}
