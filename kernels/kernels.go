// Package kernels holds imgpipe's CUDA kernels, compiled ahead of time.
//
// The sources are kernels/*.cu; kernels/build.sh compiles them with nvcc (on
// a machine with the CUDA toolkit) into one fatbin with machine code for
// sm_75, sm_80, sm_86, sm_89 and sm_90 and PTX for compute_75, which newer
// GPUs compile at load time. The fatbin is committed and embedded here, so
// neither building nor running imgpipe needs the toolkit.
//
// build.sh also records a hash of the sources it compiled (SourceHash). A
// test recomputes it from the files in this folder, so a source edited
// without a rebuild fails the build's tests instead of shipping a stale
// binary. The hash is defined in build.sh and implemented by HashSources.
package kernels

import (
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"
)

// Fatbin is the compiled kernels (a CUDA fatbin), ready for cu.ModuleLoadData.
//
//go:embed imgpipe.fatbin
var Fatbin []byte

//go:embed imgpipe.fatbin.sha256
var recordedHash string

// SourceHash is the hash of the sources Fatbin was built from, as build.sh
// recorded it (see HashSources).
var SourceHash = strings.TrimSpace(recordedHash)

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
