package dynlib

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// realLib is a shared library every Linux test machine has, copied under
// fake names to stand in for the libraries imgpipe loads.
const realLib = "/lib/x86_64-linux-gnu/libm.so.6"

// copyLib copies realLib to dir/name and returns the path.
func copyLib(t *testing.T, dir, name string) string {
	t.Helper()
	b, err := os.ReadFile(realLib)
	if err != nil {
		t.Skipf("no %s to stand in for a library: %v", realLib, err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, b, 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// isolate points every search root at empty temp folders, so that only what a
// test puts there can be found.
func isolate(t *testing.T) (cudaHome, venv string) {
	t.Helper()
	root := t.TempDir()
	cudaHome, venv = filepath.Join(root, "cuda"), filepath.Join(root, "venv")
	t.Setenv("CUDA_HOME", cudaHome)
	t.Setenv("CUDA_PATH", "")
	t.Setenv("VIRTUAL_ENV", venv)
	t.Setenv("HOME", filepath.Join(root, "home"))
	t.Setenv("IMGPIPE_FAKELIB", "")
	return cudaHome, venv
}

func fakeSpec() Spec {
	return Spec{Name: "FakeLib", Env: "IMGPIPE_FAKELIB", Sonames: []string{"libimgpipe-fake.so.2", "libimgpipe-fake.so.1"},
		WheelDirs: []string{"nvidia/fake/lib"}, Hint: "install fakelib"}
}

func TestCandidatesOrder(t *testing.T) {
	cudaHome, venv := isolate(t)
	site := filepath.Join(venv, "lib/python3.99/site-packages")
	if err := os.MkdirAll(site, 0o755); err != nil {
		t.Fatal(err)
	}
	c := fakeSpec().Candidates()
	want := []string{
		"libimgpipe-fake.so.2", "libimgpipe-fake.so.1",
		filepath.Join(cudaHome, "lib64/libimgpipe-fake.so.2"), filepath.Join(cudaHome, "lib64/libimgpipe-fake.so.1"),
	}
	if !slices.Equal(c[:4], want) {
		t.Errorf("first candidates %q, want %q", c[:4], want)
	}
	// The wheel folders come after every toolkit folder, the virtualenv's
	// first among them.
	wheel := filepath.Join(site, "nvidia/fake/lib/libimgpipe-fake.so.2")
	iw := slices.Index(c, wheel)
	it := slices.Index(c, filepath.Join(ToolkitDirs()[len(ToolkitDirs())-1], "libimgpipe-fake.so.1"))
	if iw < 0 || it < 0 || iw < it || c[iw+1] != filepath.Join(site, "nvidia/fake/lib/libimgpipe-fake.so.1") {
		t.Errorf("wheel candidate at %d, last toolkit candidate at %d: %q", iw, it, c)
	}
	t.Setenv("IMGPIPE_FAKELIB", "/some/where.so")
	if c := fakeSpec().Candidates(); !slices.Equal(c, []string{"/some/where.so"}) {
		t.Errorf("with the override set: %q, want only it", c)
	}
}

func TestOpenFinds(t *testing.T) {
	for _, tc := range []struct {
		name  string
		place func(t *testing.T, cudaHome, site string) string // puts the library somewhere, returns the path Open must report
	}{
		{"toolkit folder", func(t *testing.T, cudaHome, _ string) string {
			return copyLib(t, filepath.Join(cudaHome, "lib64"), "libimgpipe-fake.so.1")
		}},
		{"wheel folder", func(t *testing.T, _, site string) string {
			return copyLib(t, filepath.Join(site, "nvidia/fake/lib"), "libimgpipe-fake.so.2")
		}},
		{"toolkit before wheel", func(t *testing.T, cudaHome, site string) string {
			copyLib(t, filepath.Join(site, "nvidia/fake/lib"), "libimgpipe-fake.so.2")
			return copyLib(t, filepath.Join(cudaHome, "lib64"), "libimgpipe-fake.so.1")
		}},
		{"newer soname first", func(t *testing.T, cudaHome, _ string) string {
			copyLib(t, filepath.Join(cudaHome, "lib64"), "libimgpipe-fake.so.1")
			return copyLib(t, filepath.Join(cudaHome, "lib64"), "libimgpipe-fake.so.2")
		}},
		{"override", func(t *testing.T, cudaHome, _ string) string {
			copyLib(t, filepath.Join(cudaHome, "lib64"), "libimgpipe-fake.so.2")
			p := copyLib(t, t.TempDir(), "anything.so")
			t.Setenv("IMGPIPE_FAKELIB", p)
			return p
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cudaHome, venv := isolate(t)
			want := tc.place(t, cudaHome, filepath.Join(venv, "lib/python3.99/site-packages"))
			lib, err := Open(fakeSpec())
			if err != nil {
				t.Fatal(err)
			}
			if lib.Path != want {
				t.Errorf("opened %s, want %s", lib.Path, want)
			}
			if _, err := lib.Sym("cos"); err != nil {
				t.Errorf("Sym(cos): %v", err)
			}
			if _, err := lib.Sym("no_such_symbol_here"); err == nil || !strings.Contains(err.Error(), "lacks no_such_symbol_here") {
				t.Errorf("Sym of a missing symbol: %v", err)
			}
		})
	}
}

func TestOpenErrors(t *testing.T) {
	for _, tc := range []struct {
		name     string
		override func(t *testing.T) string // the IMGPIPE_FAKELIB value; "" leaves it unset
		want     []string
		notWant  []string
	}{
		{"nothing anywhere", func(*testing.T) string { return "" },
			[]string{"FakeLib: library not found (tried libimgpipe-fake.so.2: ", "libimgpipe-fake.so.1: ", "; install fakelib", "; or set IMGPIPE_FAKELIB to the library's path"}, nil},
		{"override to a missing file", func(t *testing.T) string { return filepath.Join(t.TempDir(), "missing.so") },
			[]string{"FakeLib: library not found (tried IMGPIPE_FAKELIB=", "missing.so: stat ", "no such file or directory", "; install fakelib"},
			[]string{"or set IMGPIPE_FAKELIB", "libimgpipe-fake.so.2"}},
		{"override to a file that is no library", func(t *testing.T) string {
			p := filepath.Join(t.TempDir(), "notalib.so")
			if err := os.WriteFile(p, []byte("just text\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			return p
		}, []string{"FakeLib: library not found (tried ", "notalib.so: ", "; install fakelib"}, []string{"or set IMGPIPE_FAKELIB"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			isolate(t)
			if v := tc.override(t); v != "" {
				t.Setenv("IMGPIPE_FAKELIB", v)
			}
			lib, err := Open(fakeSpec())
			if err == nil {
				t.Fatalf("opened %s", lib.Path)
			}
			if !errors.Is(err, ErrNotFound) {
				t.Errorf("error does not match ErrNotFound: %v", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q:\n%v", w, err)
				}
			}
			for _, w := range tc.notWant {
				if strings.Contains(err.Error(), w) {
					t.Errorf("error has %q:\n%v", w, err)
				}
			}
		})
	}
}
