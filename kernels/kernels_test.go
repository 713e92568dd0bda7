package kernels

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"slices"
	"strings"
	"testing"
	"testing/fstest"
)

// TestFatbinFresh fails when kernels/*.cu (or build.sh) changed after the
// committed fatbin was built: rebuild with `bash kernels/build.sh` on a
// machine with nvcc and commit imgpipe.fatbin and imgpipe.fatbin.sha256.
func TestFatbinFresh(t *testing.T) {
	got, err := HashSources(os.DirFS("."))
	if err != nil {
		t.Fatal(err)
	}
	if got != SourceHash {
		t.Fatalf("imgpipe.fatbin is stale: it was built from sources with hash %s, the sources now hash to %s; "+
			"run kernels/build.sh where nvcc is and commit imgpipe.fatbin and imgpipe.fatbin.sha256", SourceHash, got)
	}
}

// TestFatbinLooksLikeFatbin checks the embedded file's header: a CUDA fatbin
// starts with the magic 0xBA55ED50 (little-endian), so an empty or wrong
// file (a PTX text, a placeholder) is caught here rather than at load time
// on a GPU machine.
func TestFatbinLooksLikeFatbin(t *testing.T) {
	if len(Fatbin) < 16 {
		t.Fatalf("Fatbin is %d bytes", len(Fatbin))
	}
	if magic := []byte{0x50, 0xed, 0x55, 0xba}; !bytes.Equal(Fatbin[:4], magic) {
		t.Fatalf("Fatbin starts with % x, want the fatbin magic % x", Fatbin[:4], magic)
	}
	// The kernels are looked up by their C names; each must be in the binary.
	for _, name := range []string{"imgpipe_grayscale", "imgpipe_histogram", "imgpipe_transpose",
		"imgpipe_blur_h", "imgpipe_blur_v", "imgpipe_box_h", "imgpipe_box_v",
		"imgpipe_png_plan", "imgpipe_png_layout", "imgpipe_png_pack",
		"imgpipe_array_scale", "imgpipe_array_add", "imgpipe_array_sum", "imgpipe_array_min", "imgpipe_array_max"} {
		if !bytes.Contains(Fatbin, []byte(name)) {
			t.Errorf("Fatbin has no kernel %s", name)
		}
	}
}

// TestHashSources pins the hash definition: which files count, their order
// and how they are joined, so that build.sh and Go cannot silently disagree.
func TestHashSources(t *testing.T) {
	base := fstest.MapFS{
		"build.sh": {Data: []byte("nvcc\n")},
		"b.cu":     {Data: []byte("B")},
		"a.cu":     {Data: []byte("A")},
	}
	// sha256sum of the bytes "a.cu\nAb.cu\nBbuild.sh\nnvcc\n", computed with coreutils.
	const want = "5c1579545e83adc440a0d2dfd9ebfbd289c11aa7155eaff472c6f869a5f5ba70"
	h0, err := HashSources(base)
	if err != nil {
		t.Fatal(err)
	}
	if h0 != want {
		t.Fatalf("HashSources = %s, want %s", h0, want)
	}
	tests := []struct {
		name string
		edit func(fstest.MapFS)
		same bool
	}{
		{"unrelated file ignored", func(m fstest.MapFS) { m["README.md"] = &fstest.MapFile{Data: []byte("x")} }, true},
		{"Go file ignored", func(m fstest.MapFS) { m["kernels.go"] = &fstest.MapFile{Data: []byte("x")} }, true},
		{"source edited", func(m fstest.MapFS) { m["a.cu"] = &fstest.MapFile{Data: []byte("A2")} }, false},
		{"header added", func(m fstest.MapFS) { m["common.cuh"] = &fstest.MapFile{Data: []byte("")} }, false},
		{"source added", func(m fstest.MapFS) { m["c.cu"] = &fstest.MapFile{Data: []byte("")} }, false},
		{"build flags edited", func(m fstest.MapFS) { m["build.sh"] = &fstest.MapFile{Data: []byte("nvcc -G\n")} }, false},
		{"bytes moved between files", func(m fstest.MapFS) {
			m["a.cu"] = &fstest.MapFile{Data: []byte("Ab.cu\n")}
			m["b.cu"] = &fstest.MapFile{Data: []byte("")}
		}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := fstest.MapFS{}
			for k, v := range base {
				m[k] = v
			}
			tc.edit(m)
			h, err := HashSources(m)
			if err != nil {
				t.Fatal(err)
			}
			if (h == h0) != tc.same {
				t.Errorf("hash changed = %v, want %v", h != h0, !tc.same)
			}
		})
	}
	if _, err := HashSources(fstest.MapFS{"a.cu": {Data: []byte("A")}}); err == nil {
		t.Error("a folder without build.sh hashed without error")
	}
}

// TestHashMatchesBuildScript runs build.sh --hash (it needs bash and
// sha256sum, not nvcc) and compares with HashSources on this folder.
func TestHashMatchesBuildScript(t *testing.T) {
	if _, err := exec.LookPath("sha256sum"); err != nil {
		t.Skip("sha256sum not installed")
	}
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("bash not installed")
	}
	out, err := exec.Command(bash, "build.sh", "--hash").Output()
	if err != nil {
		t.Fatalf("build.sh --hash: %v", err)
	}
	got, err := HashSources(os.DirFS("."))
	if err != nil {
		t.Fatal(err)
	}
	if want := string(bytes.TrimSpace(out)); got != want {
		t.Fatalf("HashSources = %s, build.sh --hash = %s", got, want)
	}
}

// HashSources computes the source hash of build.sh over the kernel folder
// fsys: the hex SHA-256 of, for each file named *.cu, *.cuh or build.sh, in
// byte order of the names, the name, a newline, and the file's bytes. The
// build script counts as a source because its nvcc flags shape the binary.
func HashSources(fsys fs.FS) (string, error) {
	entries, err := fs.ReadDir(fsys, ".")
	if err != nil {
		return "", err
	}
	var names []string
	for _, e := range entries {
		n := e.Name()
		if !e.Type().IsRegular() {
			continue
		}
		if ok, _ := path.Match("*.cu", n); ok || n == "build.sh" || strings.HasSuffix(n, ".cuh") {
			names = append(names, n)
		}
	}
	slices.Sort(names) // Go compares strings bytewise, like LC_ALL=C sort
	if !slices.Contains(names, "build.sh") {
		return "", fmt.Errorf("kernels: build.sh not found among the sources")
	}
	h := sha256.New()
	for _, n := range names {
		b, err := fs.ReadFile(fsys, n)
		if err != nil {
			return "", err
		}
		h.Write([]byte(n + "\n"))
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
