package stages

import (
	"fmt"
	"io"
	"strings"
)

// saveFormat is one output format: its name in SaveOptions.Format and the save stage's
// format parameter, the file extension, and its encoder (options already normalized).
type saveFormat struct {
	name, ext string
	encode    func(w io.Writer, m *Image, opt SaveOptions) error
}

// saveFormats is the one table of output formats, in the order `imgpipe stages` lists them;
// png comes first as the default.
var saveFormats = []saveFormat{
	{"png", "png", func(w io.Writer, m *Image, o SaveOptions) error { return encodePNG(w, m, o.Compression) }},
	{"jpeg", "jpg", func(w io.Writer, m *Image, o SaveOptions) error { return encodeJPEG(w, m, o.Quality) }},
	{"webp", "webp", encodeWebP},
	{"tiff", "tif", func(w io.Writer, m *Image, o SaveOptions) error { return encodeTIFF(w, m, o.Compression) }},
	{"npy", "npy", func(w io.Writer, m *Image, _ SaveOptions) error { return encodeNPY(w, m) }},
}

// SaveFormats returns the names of the output formats, the default (png) first.
func SaveFormats() []string {
	names := make([]string, len(saveFormats))
	for i, f := range saveFormats {
		names[i] = f.name
	}
	return names
}

// FormatExt returns the file extension, without the dot, of the output format called name
// ("jpeg" gives "jpg"), or "" for an unknown format.
func FormatExt(name string) string {
	if f := lookupFormat(name); f != nil {
		return f.ext
	}
	return ""
}

// lookupFormat finds a format by name, in any case; "jpg" is accepted for jpeg and "tif"
// for tiff, since users write the extension.
func lookupFormat(name string) *saveFormat {
	name = strings.ToLower(name)
	for i := range saveFormats {
		if f := &saveFormats[i]; name == f.name || name == f.ext {
			return f
		}
	}
	return nil
}

// errUnknownFormat is the error for a format name lookupFormat does not know.
func errUnknownFormat(name string) error {
	return fmt.Errorf("unknown save format %q, want one of %s", name, strings.Join(SaveFormats(), ", "))
}
