package nvrtc

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/imgpipe/imgpipe/dynlib"
)

// TestMain lets the tests also use CUDA 11's NVRTC (Debian's libnvrtc11.2,
// the same API), so that compiling, errors and the cache are tested on
// development machines without CUDA 12 or 13. Imgpipe itself looks for 12
// and 13 only.
func TestMain(m *testing.M) {
	Spec.Sonames = append(Spec.Sonames, "libnvrtc.so.11.2")
	os.Exit(m.Run())
}

// requireNVRTC skips a test that needs the library when none is installed.
func requireNVRTC(t *testing.T) Info {
	t.Helper()
	info, err := Probe()
	if err != nil {
		t.Skipf("no NVRTC: %v", err)
	}
	return info
}

const okSource = `extern "C" __global__ void twice(float *a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) a[i] *= 2;
}
`

func TestParseLog(t *testing.T) {
	tests := []struct {
		name, log       string
		file            string
		line, col       int
		msg             string
		truncatedSuffix bool
	}{
		{name: "caret (NVRTC 12 and 13)",
			log:  "k.cu(3): error: identifier \"foo\" is undefined\n    x = foo + 1;\n        ^\n\n1 error detected in the compilation of \"k.cu\".\n",
			file: "k.cu", line: 3, col: 9, msg: `identifier "foo" is undefined`},
		{name: "no caret (NVRTC 11)",
			log:  "k.cu(12): error: expected a \";\"\n\n1 error detected\n",
			file: "k.cu", line: 12, msg: `expected a ";"`},
		{name: "numbered diagnostic",
			log:  "k.cu(2): error #20-D: identifier \"y\" is undefined\n  y;\n  ^\n",
			file: "k.cu", line: 2, col: 3, msg: `identifier "y" is undefined`},
		{name: "catastrophic, in an include",
			log:  "warn.cu(1): warning: something\nlib.h(7): catastrophic error: cannot open source file \"z.h\"\n",
			file: "lib.h", line: 7, msg: `cannot open source file "z.h"`},
		{name: "first error wins",
			log:  "k.cu(4): error: first\nk.cu(9): error: second\n",
			file: "k.cu", line: 4, msg: "first"},
		{name: "no diagnostic line",
			log:  "nvrtc: something odd\n",
			file: "k.cu", msg: "compilation failed"},
		{name: "huge log is cut",
			log:  "k.cu(1): error: x\n" + strings.Repeat("y", MaxLogBytes),
			file: "k.cu", line: 1, msg: "x", truncatedSuffix: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := parseLog("k.cu", tt.log, "")
			if e.File != tt.file || e.Line != tt.line || e.Col != tt.col || e.Msg != tt.msg {
				t.Errorf("got %s:%d:%d %q, want %s:%d:%d %q", e.File, e.Line, e.Col, e.Msg, tt.file, tt.line, tt.col, tt.msg)
			}
			if tt.truncatedSuffix != strings.HasSuffix(e.Log, "[log truncated]") || len(e.Log) > MaxLogBytes+32 {
				t.Errorf("log of %d bytes, truncation %v", len(e.Log), tt.truncatedSuffix)
			}
			if tt.line > 0 && !strings.HasPrefix(e.Error(), tt.file+":") {
				t.Errorf("Error() = %q, want it to start with the position", e.Error())
			}
		})
	}
}

func TestCompileErrorText(t *testing.T) {
	e := &CompileError{File: "a.cu", Line: 3, Col: 7, Msg: "bad", Log: "a.cu(3): error: bad\n"}
	if got, want := e.Error(), "a.cu:3:7: bad\nNVRTC log:\na.cu(3): error: bad"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	e.Col = 0
	if got := e.Error(); !strings.HasPrefix(got, "a.cu:3: bad") {
		t.Errorf("without a column: %q", got)
	}
}

func TestKey(t *testing.T) {
	base := Request{Name: "k.cu", Source: okSource, Arch: 90, Flags: []string{"-DA=1"}}
	k0 := Key(base, "13.0")
	if len(k0) != 64 || Key(base, "13.0") != k0 {
		t.Fatalf("key %q is not a stable SHA-256", k0)
	}
	variants := map[string]struct {
		r       Request
		version string
	}{
		"version":        {base, "12.9"},
		"arch":           {Request{Name: "k.cu", Source: okSource, Arch: 80, Flags: base.Flags}, "13.0"},
		"flag":           {Request{Name: "k.cu", Source: okSource, Arch: 90, Flags: []string{"-DA=2"}}, "13.0"},
		"no flags":       {Request{Name: "k.cu", Source: okSource, Arch: 90}, "13.0"},
		"flags split":    {Request{Name: "k.cu", Source: okSource, Arch: 90, Flags: []string{"-DA", "=1"}}, "13.0"},
		"name":           {Request{Name: "j.cu", Source: okSource, Arch: 90, Flags: base.Flags}, "13.0"},
		"source":         {Request{Name: "k.cu", Source: okSource + " ", Arch: 90, Flags: base.Flags}, "13.0"},
		"name to source": {Request{Name: "k.c", Source: "u" + okSource, Arch: 90, Flags: base.Flags}, "13.0"},
	}
	seen := map[string]string{k0: "base"}
	for what, v := range variants {
		k := Key(v.r, v.version)
		if prev, dup := seen[k]; dup {
			t.Errorf("%s gives the same key as %s", what, prev)
		}
		seen[k] = what
	}
}

func TestRequestCheck(t *testing.T) {
	tests := []struct {
		name string
		r    Request
		want string
	}{
		{"no name", Request{Source: okSource, Arch: 90}, "program name"},
		{"empty source", Request{Name: "k.cu", Arch: 90}, "empty source"},
		{"too long", Request{Name: "k.cu", Source: strings.Repeat("x", MaxSourceBytes+1), Arch: 90}, "at most"},
		{"NUL", Request{Name: "k.cu", Source: "a\x00b", Arch: 90}, "NUL"},
		{"no arch", Request{Name: "k.cu", Source: okSource}, "architecture 0"},
		{"arch flag", Request{Name: "k.cu", Source: okSource, Arch: 90, Flags: []string{"--gpu-architecture=sm_80"}}, "comes from the device"},
		{"empty flag", Request{Name: "k.cu", Source: okSource, Arch: 90, Flags: []string{""}}, "bad option"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Compile(tt.r, "")
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got %v, want an error with %q", err, tt.want)
			}
		})
	}
}

func TestOpenErrors(t *testing.T) {
	t.Run("override names a missing file", func(t *testing.T) {
		t.Setenv("IMGPIPE_TEST_NVRTC", filepath.Join(t.TempDir(), "libnvrtc.so"))
		_, err := open(dynlib.Spec{Name: "NVRTC", Env: "IMGPIPE_TEST_NVRTC", Sonames: []string{"libnvrtc.so.13"}})
		if !errors.Is(err, dynlib.ErrNotFound) || !strings.Contains(err.Error(), "IMGPIPE_TEST_NVRTC=") {
			t.Errorf("got %v", err)
		}
	})
	t.Run("no such soname", func(t *testing.T) {
		_, err := open(dynlib.Spec{Name: "NVRTC", Sonames: []string{"libnvrtc-imgpipe-absent.so.99"}, Hint: "install it"})
		if !errors.Is(err, dynlib.ErrNotFound) || !strings.Contains(err.Error(), "install it") {
			t.Errorf("got %v", err)
		}
	})
	t.Run("a library that is not NVRTC", func(t *testing.T) {
		_, err := open(dynlib.Spec{Name: "NVRTC", Sonames: []string{"libc.so.6"}})
		if err == nil || !strings.Contains(err.Error(), "lacks nvrtc") {
			t.Errorf("got %v", err)
		}
	})
}

func TestCompile(t *testing.T) {
	info := requireNVRTC(t)
	arch := info.Archs[len(info.Archs)-1]
	code, err := Compile(Request{Name: "twice.cu", Source: okSource, Arch: arch}, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(code) < 4 || string(code[1:4]) != "ELF" {
		t.Errorf("got %d bytes starting %q, want a CUBIN (ELF)", len(code), code[:min(4, len(code))])
	}
}

func TestCompileErrors(t *testing.T) {
	info := requireNVRTC(t)
	arch := info.Archs[len(info.Archs)-1]
	src := "extern \"C\" __global__ void f(int *p) {\n    int ok = 1;\n    p[0] = undefined_x + ok;\n}\n"
	cache := t.TempDir()
	_, err := Compile(Request{Name: "bad.cu", Source: src, Arch: arch}, cache)
	if ents, _ := os.ReadDir(cache); len(ents) != 0 {
		t.Errorf("a failed compile left %d cache files", len(ents))
	}
	var ce *CompileError
	if !errors.As(err, &ce) {
		t.Fatalf("got %v, want a *CompileError", err)
	}
	if ce.File != "bad.cu" || ce.Line != 3 || !strings.Contains(ce.Msg, "undefined_x") || !strings.Contains(ce.Log, "bad.cu(3)") {
		t.Errorf("got %+v", ce)
	}
	if ce.Col != 0 && ce.Col != 12 {
		t.Errorf("column %d, want 12 (the caret under undefined_x) or 0 (an NVRTC without carets)", ce.Col)
	}

	_, err = Compile(Request{Name: "k.cu", Source: okSource, Arch: 11}, "")
	if err == nil || !strings.Contains(err.Error(), "cannot compile for sm_11") {
		t.Errorf("unsupported architecture: %v", err)
	}
	_, err = Compile(Request{Name: "k.cu", Source: okSource, Arch: arch, Flags: []string{"--no-such-option"}}, "")
	var ne *Error
	if !errors.As(err, &ne) || ne.Call != "nvrtcCompileProgram" {
		t.Errorf("bad option: %v", err)
	}
}

func TestCompileCache(t *testing.T) {
	info := requireNVRTC(t)
	r := Request{Name: "twice.cu", Source: okSource, Arch: info.Archs[len(info.Archs)-1]}
	dir := filepath.Join(t.TempDir(), "kernels")
	code, err := Compile(r, dir)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, Key(r, info.Version)+".cubin")
	stored, err := os.ReadFile(path)
	if err != nil || string(stored) != string(code) {
		t.Fatalf("cache entry: %v (%d bytes, want %d)", err, len(stored), len(code))
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("cache folder holds %d files, want the entry alone (no temporaries)", len(ents))
	}
	// A second compile must read the entry, not run NVRTC: mark it.
	if err := os.WriteFile(path, []byte("marked"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := Compile(r, dir); err != nil || string(got) != "marked" {
		t.Errorf("second compile: %q, %v; want the cached entry", got, err)
	}
	// Another architecture is another entry.
	r.Arch = info.Archs[0]
	if got, err := Compile(r, dir); err != nil || string(got) == "marked" {
		t.Errorf("other architecture: %v, cached %v", err, string(got) == "marked")
	}
	// An unreadable cache is an error, not a silent recompile.
	r.Arch = info.Archs[len(info.Archs)-1]
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(path, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := Compile(r, dir); err == nil || !strings.Contains(err.Error(), "reading the cache") {
		t.Errorf("unreadable entry: %v", err)
	}
}

func TestProbe(t *testing.T) {
	info := requireNVRTC(t)
	if info.Version == "" || info.Path == "" || len(info.Archs) == 0 {
		t.Errorf("incomplete info %+v", info)
	}
}
