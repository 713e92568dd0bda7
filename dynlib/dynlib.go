// Package dynlib finds and opens the shared libraries imgpipe loads at run
// time (nvJPEG, NVRTC, libwebp, ...), so that building imgpipe needs none of
// them and a machine without one still runs everything else.
//
// Every library is searched the same way, in this order, and the first file
// that opens wins:
//
//  1. the override variable (Spec.Env), a file path: when it is set, only
//     that file is tried, so a wrong override is an error, not a silent
//     fallback;
//  2. each soname (Spec.Sonames, newest first), through the system loader's
//     own search (LD_LIBRARY_PATH, the ld.so cache);
//  3. each soname in the CUDA toolkit's library folders (ToolkitDirs);
//  4. each soname in the pip wheel folders (Spec.WheelDirs) under every
//     site-packages folder of the Python installations that are found.
//
// When nothing opens, the error lists every place tried and why it failed.
package dynlib

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/ebitengine/purego"
)

// Spec says what library to look for and where.
type Spec struct {
	Name      string   // what users call it, for messages: "nvJPEG"
	Env       string   // the override variable: "IMGPIPE_NVJPEG"
	Sonames   []string // file names to try, newest first: "libnvjpeg.so.13"
	WheelDirs []string // folders inside site-packages that pip wheels use: "nvidia/nvjpeg/lib"
	Global    bool     // open with RTLD_GLOBAL (the CUDA libraries share symbols), else RTLD_LOCAL
	Hint      string   // how to install it, appended to the error: "install CUDA 13's libnvjpeg"
}

// ErrNotFound is matched (errors.Is) by Open's error when no candidate opened.
var ErrNotFound = errors.New("library not found")

// Lib is an opened library.
type Lib struct {
	Handle uintptr // the dlopen handle
	Path   string  // the candidate that opened: a path or a bare soname
}

// Sym returns the address of the exported symbol name.
func (l *Lib) Sym(name string) (uintptr, error) {
	p, err := purego.Dlsym(l.Handle, name)
	if err != nil {
		return 0, fmt.Errorf("%s lacks %s", l.Path, name)
	}
	return p, nil
}

// ToolkitDirs are the CUDA toolkit's library folders, searched after the
// system loader: $CUDA_HOME and $CUDA_PATH first when set.
func ToolkitDirs() []string {
	var dirs []string
	for _, env := range []string{"CUDA_HOME", "CUDA_PATH"} {
		if root := os.Getenv(env); root != "" {
			dirs = append(dirs, filepath.Join(root, "lib64"), filepath.Join(root, "targets/x86_64-linux/lib"))
		}
	}
	return append(dirs,
		"/usr/local/cuda/lib64",
		"/usr/local/cuda/targets/x86_64-linux/lib",
		"/usr/lib/x86_64-linux-gnu",
		"/usr/local/cuda-13/lib64",
		"/usr/local/cuda-12/lib64",
	)
}

// SitePackages returns the site-packages folders of the Python
// installations found: $VIRTUAL_ENV, python3.* under /usr/local/lib,
// /usr/lib, /opt/*/.venv and ~/.local.
func SitePackages() []string {
	var roots []string
	if v := os.Getenv("VIRTUAL_ENV"); v != "" {
		roots = append(roots, v+"/lib/python3*/site-packages")
	}
	home, _ := os.UserHomeDir()
	roots = append(roots,
		"/usr/local/lib/python3*/dist-packages",
		"/usr/local/lib/python3*/site-packages",
		"/usr/lib/python3/dist-packages",
		"/opt/*/.venv/lib/python3*/site-packages",
		"/opt/*/lib/python3*/site-packages",
	)
	if home != "" {
		roots = append(roots, home+"/.local/lib/python3*/site-packages")
	}
	var out []string
	for _, pattern := range roots {
		m, _ := filepath.Glob(pattern)
		out = append(out, m...)
	}
	return out
}

// Candidates returns what Open tries, in order: the override alone when
// it is set, else the sonames, then the sonames in the toolkit folders,
// then in the wheel folders.
func (s Spec) Candidates() []string {
	if s.Env != "" {
		if p := os.Getenv(s.Env); p != "" {
			return []string{p}
		}
	}
	c := append([]string(nil), s.Sonames...)
	for _, dir := range ToolkitDirs() {
		for _, so := range s.Sonames {
			c = append(c, filepath.Join(dir, so))
		}
	}
	for _, site := range SitePackages() {
		for _, w := range s.WheelDirs {
			for _, so := range s.Sonames {
				c = append(c, filepath.Join(site, w, so))
			}
		}
	}
	return c
}

// Open opens the first candidate that loads. Candidates that are paths
// and do not exist are skipped quietly; the error names the others with
// the loader's reason.
func Open(s Spec) (*Lib, error) {
	flags := purego.RTLD_NOW | purego.RTLD_LOCAL
	if s.Global {
		flags = purego.RTLD_NOW | purego.RTLD_GLOBAL
	}
	var tried []string
	for _, c := range s.Candidates() {
		if strings.ContainsRune(c, '/') {
			if _, err := os.Stat(c); err != nil {
				if s.Env != "" && os.Getenv(s.Env) == c {
					tried = append(tried, fmt.Sprintf("%s=%s: %v", s.Env, c, err))
				}
				continue
			}
		}
		h, err := purego.Dlopen(c, flags)
		if err == nil {
			return &Lib{Handle: h, Path: c}, nil
		}
		tried = append(tried, fmt.Sprintf("%s: %v", c, err))
	}
	msg := fmt.Sprintf("%s: %v", s.Name, ErrNotFound)
	if len(tried) > 0 {
		msg += " (tried " + strings.Join(tried, "; ") + ")"
	} else {
		msg += fmt.Sprintf(" (no %s in the loader's path, the CUDA toolkit's folders or pip wheels)", strings.Join(s.Sonames, " or "))
	}
	if s.Hint != "" {
		msg += "; " + s.Hint
	}
	if s.Env != "" && os.Getenv(s.Env) == "" {
		msg += fmt.Sprintf("; or set %s to the library's path", s.Env)
	}
	return nil, &notFound{msg}
}

type notFound struct{ msg string }

func (e *notFound) Error() string   { return e.msg }
func (e *notFound) Is(t error) bool { return t == ErrNotFound }
