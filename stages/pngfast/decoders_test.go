package pngfast

import (
	"bytes"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Independent decoders: Pillow and libpng (through a small C program built
// here against Debian's libpng-dev) must read every file to the exact
// pixels, and pngcheck must find nothing to complain about. Each skips, and
// says why, where its tool is missing; CI (.ci/run) installs all three.

// decoderCases writes the test images' PNGs and raw pixels into dir and
// returns their names.
func decoderCases(t *testing.T, dir string) []string {
	rng := rand.New(rand.NewSource(17))
	gray, rgb := photos(t)
	images := []img{
		randomImg(rng, 1, 1, 1, 0), randomImg(rng, 1, 1, 3, 0),
		randomImg(rng, 1, 200, 3, 0), smoothImg(rng, 200, 1, 1, 0),
		randomImg(rng, 17, 9, 3, 4), smoothImg(rng, 33, 31, 1, 1),
		randomImg(rng, 65535, 1, 1, 0), randomImg(rng, 65536, 1, 1, 0), smoothImg(rng, 21845, 2, 3, 0),
		gray[0], rgb[len(rgb)-1],
	}
	var names []string
	for i, m := range images {
		name := fmt.Sprintf("%02d-%dx%dx%d", i, m.w, m.h, m.c)
		if err := os.WriteFile(filepath.Join(dir, name+".png"), encode(m), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name+".raw"), m.packed(), 0o644); err != nil {
			t.Fatal(err)
		}
		names = append(names, name)
	}
	return names
}

// compareDecoded checks that every name.ext in dir equals name.raw.
func compareDecoded(t *testing.T, dir, ext string, names []string) {
	t.Helper()
	for _, name := range names {
		got, err := os.ReadFile(filepath.Join(dir, name+ext))
		if err != nil {
			t.Fatal(err)
		}
		want, _ := os.ReadFile(filepath.Join(dir, name+".raw"))
		if !bytes.Equal(got, want) {
			t.Errorf("%s: decoded %d bytes, not the %d pixels encoded", name, len(got), len(want))
		}
	}
}

func TestPillowDecodes(t *testing.T) {
	python := ""
	for _, p := range []string{"/usr/bin/python3", "python3"} {
		if exec.Command(p, "-c", "import PIL").Run() == nil {
			python = p
			break
		}
	}
	if python == "" {
		t.Skip("no python3 with Pillow (Debian: python3-pil)")
	}
	dir := t.TempDir()
	names := decoderCases(t, dir)
	script := `import sys
from PIL import Image
d = sys.argv[1]
for n in sys.argv[2:]:
    im = Image.open(f"{d}/{n}.png")
    assert im.mode in ("L", "RGB"), im.mode
    open(f"{d}/{n}.pil", "wb").write(im.tobytes())
`
	if out, err := exec.Command(python, append([]string{"-c", script, dir}, names...)...).CombinedOutput(); err != nil {
		t.Fatalf("Pillow: %v\n%s", err, out)
	}
	compareDecoded(t, dir, ".pil", names)
}

// pngRead is a libpng reader through its simplified API, which keeps 8-bit
// gray and RGB as they are stored.
const pngRead = `#include <png.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
int main(int argc, char **argv) {
	for (int i = 2; i < argc; i++) {
		char in[4096], out[4096];
		snprintf(in, sizeof in, "%s/%s.png", argv[1], argv[i]);
		snprintf(out, sizeof out, "%s/%s.libpng", argv[1], argv[i]);
		png_image im;
		memset(&im, 0, sizeof im);
		im.version = PNG_IMAGE_VERSION;
		if (!png_image_begin_read_from_file(&im, in)) { fprintf(stderr, "%s: %s\n", in, im.message); return 1; }
		png_bytep buf = malloc(PNG_IMAGE_SIZE(im));
		if (!png_image_finish_read(&im, NULL, buf, 0, NULL)) { fprintf(stderr, "%s: %s\n", in, im.message); return 1; }
		if (im.warning_or_error) { fprintf(stderr, "%s: warning %s\n", in, im.message); return 1; }
		FILE *f = fopen(out, "wb");
		if (!f || fwrite(buf, 1, PNG_IMAGE_SIZE(im), f) != PNG_IMAGE_SIZE(im) || fclose(f)) { perror(out); return 1; }
		free(buf);
	}
	return 0;
}
`

func TestLibpngDecodes(t *testing.T) {
	if _, err := exec.LookPath("gcc"); err != nil {
		t.Skip("no gcc to build the libpng reader")
	}
	dir := t.TempDir()
	src, bin := filepath.Join(dir, "read.c"), filepath.Join(dir, "read")
	if err := os.WriteFile(src, []byte(pngRead), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("gcc", "-O1", "-o", bin, src, "-lpng").CombinedOutput(); err != nil {
		t.Skipf("cannot build against libpng (Debian: libpng-dev): %v\n%s", err, out)
	}
	names := decoderCases(t, dir)
	if out, err := exec.Command(bin, append([]string{dir}, names...)...).CombinedOutput(); err != nil {
		t.Fatalf("libpng: %v\n%s", err, out)
	}
	compareDecoded(t, dir, ".libpng", names)
}

func TestPngcheckAccepts(t *testing.T) {
	if _, err := exec.LookPath("pngcheck"); err != nil {
		t.Skip("no pngcheck (Debian: pngcheck)")
	}
	dir := t.TempDir()
	for _, name := range decoderCases(t, dir) {
		out, err := exec.Command("pngcheck", filepath.Join(dir, name+".png")).CombinedOutput()
		if err != nil || !strings.Contains(string(out), "OK:") {
			t.Errorf("pngcheck %s: %v\n%s", name, err, out)
		}
	}
}
