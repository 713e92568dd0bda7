//go:build !((darwin || freebsd || linux || netbsd) && !android && !faketime)

package jpegturbo

import (
	"fmt"
	"runtime"
)

// open fails: purego cannot load libraries on this platform.
func open(string) (*library, error) {
	return nil, fmt.Errorf("%w: loading libraries at run time is not supported on %s/%s", ErrUnavailable, runtime.GOOS, runtime.GOARCH)
}

// call is never reached: open never returns a library here.
func (l *library) call(uintptr, ...uintptr) uintptr {
	panic("jpegturbo: no library on " + runtime.GOOS)
}
