package nvrtc

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/imgpipe/imgpipe/fsguard"
	"github.com/imgpipe/imgpipe/stages"
)

// cacheFormat is part of every cache key: changing how programs are compiled
// or stored changes it, so old entries are never read.
const cacheFormat = "imgpipe-nvrtc-cubin-1"

// DefaultCacheDir is where compiled programs are kept:
// os.UserCacheDir()/imgpipe/kernels ($XDG_CACHE_HOME or ~/.cache on Linux).
func DefaultCacheDir() (string, error) {
	dir, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("nvrtc: no cache folder: %w", err)
	}
	return filepath.Join(dir, "imgpipe", "kernels"), nil
}

// Key is the cache key of r compiled by NVRTC version (as "13.0"): the
// SHA-256, in hex, of the cache format, the version, the options (the
// architecture first), the program's name (it appears in the code's debug
// information and __FILE__) and its source. Every field is length-prefixed,
// so no two requests share a key by shifting bytes between fields.
func Key(r Request, version string) string {
	h := sha256.New()
	field := func(s string) {
		var n [8]byte
		binary.LittleEndian.PutUint64(n[:], uint64(len(s)))
		h.Write(n[:])
		io.WriteString(h, s)
	}
	field(cacheFormat)
	field(version)
	opts := r.Options()
	field(fmt.Sprint(len(opts)))
	for _, o := range opts {
		field(o)
	}
	field(r.Name)
	field(r.Source)
	return hex.EncodeToString(h.Sum(nil))
}

// maxCachedBytes bounds a cache entry read back: far above the CUBIN of any kernel of at
// most MaxSourceBytes of source.
const maxCachedBytes = 64 << 20

// Compile compiles r into CUBIN for its architecture. When cacheDir is not
// empty, the code is first looked up there under Key and, after a
// successful compile, stored there with an atomic write (a temporary file,
// fsync, rename), so concurrent imgpipe processes never see a partial entry.
// Compile errors are *CompileError and are not cached. A cache that cannot be
// written is not an error: the code is returned anyway.
func Compile(r Request, cacheDir string) ([]byte, error) {
	if err := r.check(); err != nil {
		return nil, err
	}
	l, err := load()
	if err != nil {
		return nil, err
	}
	var path string
	if cacheDir != "" {
		path = filepath.Join(cacheDir, Key(r, fmt.Sprintf("%d.%d", l.major, l.minor))+".cubin")
		// A link, FIFO or device planted at the entry's name, or one over the bound, is a
		// miss: never followed, waited on or read without end, and replaced below.
		code, err := fsguard.ReadFile(path, fsguard.NoLinks, maxCachedBytes)
		switch {
		case err == nil && len(code) > 0:
			return code, nil
		case err != nil && !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, fsguard.ErrNotRegular) && !errors.Is(err, fsguard.ErrTooLarge):
			return nil, fmt.Errorf("nvrtc: reading the cache: %w", err)
		}
	}
	code, err := l.compile(r)
	if err != nil || path == "" {
		return code, err
	}
	// A failed write only costs a compile next time.
	_ = stages.WriteFileAtomic(path, func(w io.Writer) error {
		_, err := w.Write(code)
		return err
	})
	return code, nil
}
