package stages

import (
	"bytes"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/imgpipe/imgpipe/stages/jpegturbo"
)

func TestJPEGBackendCheck(t *testing.T) {
	for _, tc := range []struct {
		b       JPEGBackend
		wantErr string
	}{
		{"", ""},
		{JPEGGo, ""},
		{JPEGAuto, ""},
		{"nvjpeg", `unknown JPEG backend "nvjpeg" (want "auto", "go" or "turbo")`},
		{"Turbo", `unknown JPEG backend "Turbo"`},
	} {
		err := tc.b.Check()
		if tc.wantErr == "" {
			if err != nil {
				t.Errorf("%q: %v", tc.b, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("%q: error %v, want %q", tc.b, err, tc.wantErr)
		}
		// Decode and DecodeHeader refuse it before reading anything.
		opt := DecodeOptions{JPEG: tc.b}
		if _, err := DecodeHeader(fixtures(t)["orient_1.jpg"], opt); err == nil || !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("DecodeHeader with %q: %v", tc.b, err)
		}
		if _, err := Decode([]byte("not even an image"), opt, nil); err == nil || !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("Decode with %q: %v", tc.b, err)
		}
	}
	// Whether turbo is usable depends on the machine; its answer must agree
	// with the package's.
	if got, want := JPEGTurbo.Check(), jpegturbo.Available(); (got == nil) != (want == nil) {
		t.Errorf("JPEGTurbo.Check() = %v, jpegturbo.Available() = %v", got, want)
	}
}

// BenchmarkDecodeJPEGBackend decodes one 1080p photo-like JPEG with each
// backend, into a reused buffer as the pipeline does. The file is
// IMGPIPE_BENCH_PHOTO as it is, else the first 1920x1080 photo in
// out/bench-photos, else the smooth synthetic picture encoded at quality 90.
func BenchmarkDecodeJPEGBackend(b *testing.B) {
	data, what := benchJPEG(b)
	hd, err := DecodeHeader(data, DecodeOptions{Orient: true})
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("%s: %dx%d, %d bytes", what, hd.W, hd.H, len(data))
	for _, backend := range []JPEGBackend{JPEGGo, JPEGTurbo} {
		b.Run(string(backend), func(b *testing.B) {
			if err := backend.Check(); err != nil {
				b.Skip(err)
			}
			dst := NewImage(hd.W, hd.H, 3)
			alloc := func(w, h, c int) (*Image, error) { return dst, nil }
			opt := DecodeOptions{Orient: true, JPEG: backend}
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				if _, err := Decode(data, opt, alloc); err != nil {
					b.Fatal(err)
				}
			}
			reportMPs(b, hd.W*hd.H)
		})
	}
}

func benchJPEG(b *testing.B) ([]byte, string) {
	if p := os.Getenv("IMGPIPE_BENCH_PHOTO"); p != "" {
		data, err := os.ReadFile(p)
		if err != nil {
			b.Fatal(err)
		}
		return data, p
	}
	all, _ := filepath.Glob("../out/bench-photos/*/*.jpg")
	sort.Strings(all)
	for _, p := range all {
		data, err := os.ReadFile(p)
		if err != nil {
			b.Fatal(err)
		}
		if hd, err := DecodeHeader(data, DecodeOptions{Orient: true}); err == nil && hd.W == benchW && hd.H == benchH {
			return data, p
		}
	}
	var buf bytes.Buffer
	src := smoothImage(rand.New(rand.NewSource(42)), benchW, benchH, 3, 0)
	if err := Encode(&buf, src, SaveOptions{Format: "jpeg", Quality: 90}); err != nil {
		b.Fatal(err)
	}
	return buf.Bytes(), "synthetic smooth 1080p, quality 90"
}

func TestResolveJPEGBackend(t *testing.T) {
	missing := func() error { return fmt.Errorf("%w: libturbojpeg.so.0 not found", jpegturbo.ErrUnavailable) }
	present := func() error { return nil }
	for _, tc := range []struct {
		name     string
		b        JPEGBackend
		turbo    func() error
		want     JPEGBackend
		wantNote string
	}{
		{"empty is go", "", present, JPEGGo, ""},
		{"go stays go", JPEGGo, present, JPEGGo, ""},
		{"turbo stays turbo", JPEGTurbo, missing, JPEGTurbo, ""}, // Check reports a missing library
		{"auto with the library", JPEGAuto, present, JPEGTurbo, ""},
		{"auto without it", JPEGAuto, missing, JPEGGo, "Go's decoder, since libjpeg-turbo unavailable: libturbojpeg.so.0 not found; install libjpeg-turbo (Debian/Ubuntu: apt-get install libturbojpeg0)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, note := resolveJPEGBackend(tc.b, tc.turbo)
			if got != tc.want || (tc.wantNote == "") != (note == "") || !strings.Contains(note, tc.wantNote) {
				t.Errorf("resolve(%q) = %q, %q; want %q, %q", tc.b, got, note, tc.want, tc.wantNote)
			}
		})
	}
	// The exported one answers for this machine.
	got, _ := ResolveJPEGBackend(JPEGAuto)
	if want := map[bool]JPEGBackend{true: JPEGTurbo, false: JPEGGo}[jpegturbo.Available() == nil]; got != want {
		t.Errorf("ResolveJPEGBackend(auto) = %q here, want %q", got, want)
	}
}

// TestDecodeByNamesTheDecoder: the report's decoder is the one that made the
// pixels, JPEG or not, fallbacks included.
func TestDecodeByNamesTheDecoder(t *testing.T) {
	fx := fixtures(t)
	turboHere := jpegturbo.Available() == nil
	for _, tc := range []struct {
		file    string
		backend JPEGBackend
		want    JPEGBackend
	}{
		{"orient_1.jpg", JPEGGo, JPEGGo},
		{"orient_1.jpg", "", JPEGGo},
		{"orient_1.jpg", JPEGAuto, map[bool]JPEGBackend{true: JPEGTurbo, false: JPEGGo}[turboHere]},
		{"orient_6.jpg", JPEGAuto, map[bool]JPEGBackend{true: JPEGTurbo, false: JPEGGo}[turboHere]},
		{"cmyk.jpg", JPEGAuto, JPEGGo}, // libjpeg-turbo does not give CMYK as RGB: Go's decoder does
	} {
		_, d, err := DecodeBy(fx[tc.file], DecodeOptions{JPEG: tc.backend, Orient: true}, nil)
		if by := d.Backend; err != nil || by != tc.want || d.Scale != 1 {
			t.Errorf("%s with %q: decoder %q, %v; want %q", tc.file, tc.backend, by, err, tc.want)
		}
	}
	png := encoded(t, func(b *bytes.Buffer) error { return Encode(b, NewImage(3, 2, 3), SaveOptions{}) })
	if _, d, err := DecodeBy(png, DecodeOptions{JPEG: JPEGAuto}, nil); err != nil || d.Backend != JPEGGo {
		by := d.Backend
		t.Errorf("PNG with auto: decoder %q, %v; want go", by, err)
	}
	if _, d, err := DecodeBy([]byte("junk"), DecodeOptions{JPEG: JPEGAuto}, nil); err == nil || d != (Decoded{}) {
		by := d.Backend
		t.Errorf("junk: decoder %q, %v; want none and an error", by, err)
	}
}
