//go:build (darwin || freebsd || linux || netbsd) && !android && !faketime

package jpegturbo

import (
	"fmt"

	"github.com/ebitengine/purego"
)

// open loads the TurboJPEG library at path and looks up the entry points.
// It is separate from load so that tests can open other libraries.
func open(path string) (*library, error) {
	// RTLD_LOCAL: libturbojpeg carries its own copy of libjpeg's jpeg_*
	// symbols, which must not stand in for another library's.
	h, err := purego.Dlopen(path, purego.RTLD_NOW|purego.RTLD_LOCAL)
	if err != nil {
		return nil, fmt.Errorf("%w: %v (install libturbojpeg0)", ErrUnavailable, err)
	}
	l := &library{}
	for _, s := range l.symbols() {
		if *s.dst, err = purego.Dlsym(h, s.name); err != nil {
			purego.Dlclose(h)
			return nil, fmt.Errorf("%w: %s lacks %s (TurboJPEG 2.0 or newer is needed)", ErrUnavailable, path, s.name)
		}
	}
	return l, nil
}

// call invokes a TurboJPEG function and returns its raw result. Callers pass
// pointers as uintptr(unsafe.Pointer(p)) in the argument list itself:
// uintptrescapes keeps those objects alive, and on the heap where they
// cannot move, until the call returns.
//
//go:uintptrescapes
func (l *library) call(fn uintptr, args ...uintptr) uintptr {
	r, _, _ := purego.SyscallN(fn, args...)
	return r
}
