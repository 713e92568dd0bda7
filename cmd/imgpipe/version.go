package main

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"

	"github.com/imgpipe/imgpipe/cudastage/nvjpeg"
	"github.com/imgpipe/imgpipe/dynlib"
	"github.com/imgpipe/imgpipe/pipeline/folderrun"
	"github.com/imgpipe/imgpipe/stages/jpegturbo"
	"github.com/imgpipe/imgpipe/stages/libwebp"
)

// version may be set at build time with -ldflags "-X main.version=v1.2.3"; otherwise the
// module version from the build info is used (what `go install ...@v1.2.3` records).
var version = ""

func newVersionCmd(stdout io.Writer) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version, the Go version and which run-time libraries load",
		Args:  cobra.NoArgs,
		Run: func(cmd *cobra.Command, args []string) {
			fmt.Fprint(stdout, versionReport())
		},
	}
}

// moduleVersion is imgpipe's version: the linker's, the build info's module version, or
// "devel" for a build from a source tree; with the commit when the build info has it.
func moduleVersion(bi *debug.BuildInfo) string {
	v := version
	if v == "" && bi != nil && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		v = bi.Main.Version
	}
	if v == "" {
		v = "devel"
	}
	if bi != nil {
		for _, kv := range bi.Settings {
			if kv.Key == "vcs.revision" && len(kv.Value) >= 12 {
				v += " (" + kv.Value[:12] + ")"
			}
		}
	}
	return v
}

// versionReport is what version and --version print: the version line, then whether each
// library loaded at run time loads here, and from where, or in short why not.
func versionReport() string {
	var b strings.Builder
	fmt.Fprintf(&b, "imgpipe %s %s %s/%s\n", moduleVersion(buildInfo()), runtime.Version(), runtime.GOOS, runtime.GOARCH)
	lib := func(name, status string) { fmt.Fprintf(&b, "  %-14s %s\n", name+":", status) }
	if infos, err := listDevices(); err != nil {
		lib("CUDA", "no ("+folderrun.ShortGPUReason(err)+")")
	} else if len(infos) == 0 {
		lib("CUDA", "driver loads, no device")
	} else {
		lib("CUDA", fmt.Sprintf("yes (CUDA %s, %d GPU: %s)", infos[0].CUDAVersion, len(infos), infos[0].Name))
	}
	if l, err := dynlib.Open(nvjpeg.Spec); err != nil {
		lib("nvJPEG", "no ("+libReason(err)+")")
	} else {
		lib("nvJPEG", "yes ("+l.Path+")")
	}
	if err := jpegturbo.Available(); err != nil {
		lib("libjpeg-turbo", "no ("+libReason(err)+")")
	} else {
		lib("libjpeg-turbo", "yes ("+jpegturbo.LibraryName+")")
	}
	if err := libwebp.Available(); err != nil {
		lib("libwebp", "no ("+libReason(err)+")")
	} else {
		lib("libwebp", "yes ("+libwebp.Path()+")")
	}
	return b.String()
}

// libReason shortens a loader's error to its first clause: the list of every place tried
// belongs to the error of the command that needs the library.
func libReason(err error) string {
	r := err.Error()
	if i := strings.Index(r, " (tried "); i > 0 {
		r = r[:i]
	}
	return r
}

// buildInfo is the binary's build info, nil when it has none.
func buildInfo() *debug.BuildInfo {
	bi, _ := debug.ReadBuildInfo()
	return bi
}
