module github.com/imgpipe/imgpipe

go 1.26.8

require (
	// A test oracle only (the project card names it): stages/*_test.go compare the CPU
	// stages with it; no production code imports it.
	github.com/disintegration/imaging v1.6.2
	github.com/ebitengine/purego v0.11.3
	github.com/reugn/go-streams v0.12.0
	github.com/schollz/progressbar/v3 v3.19.1
	github.com/spf13/cobra v1.10.2
	go.yaml.in/yaml/v4 v4.0.0
	golang.org/x/image v0.47.0
	golang.org/x/sync v0.24.0
	golang.org/x/sys v0.49.0
	golang.org/x/term v0.47.0
)

require github.com/bmatcuk/doublestar/v4 v4.10.4

require (
	github.com/cpuguy83/go-md2man/v2 v2.0.6 // indirect
	github.com/inconshreveable/mousetrap v1.1.0 // indirect
	github.com/mitchellh/colorstring v0.0.0-20190213212951-d06e56a500db // indirect
	github.com/rivo/uniseg v0.4.7 // indirect
	github.com/russross/blackfriday/v2 v2.1.0 // indirect
	github.com/spf13/pflag v1.0.9 // indirect
	go.yaml.in/yaml/v3 v3.0.4 // indirect
)
