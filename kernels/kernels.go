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
// binary. The hash is defined in build.sh (TestFatbinFresh implements it in Go).
package kernels

import (
	_ "embed"
	"fmt"
	"os"
	"strings"
)

// Fatbin is the compiled kernels (a CUDA fatbin), ready for cu.ModuleLoadData.
//
//go:embed imgpipe.fatbin
var Fatbin []byte

//go:embed imgpipe.fatbin.sha256
var recordedHash string

// SourceHash is the hash of the sources Fatbin was built from, as build.sh
// recorded it (see build.sh).
var SourceHash = strings.TrimSpace(recordedHash)

// EnvFatbin names a fatbin file that Image returns instead of the embedded
// one: for kernel work on a GPU machine, to run a fatbin just rebuilt by
// build.sh without rebuilding imgpipe or its tests.
const EnvFatbin = "IMGPIPE_FATBIN"

// Image returns the fatbin to load: the file EnvFatbin names when it is set,
// else Fatbin.
func Image() ([]byte, error) {
	path := os.Getenv(EnvFatbin)
	if path == "" {
		return Fatbin, nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", EnvFatbin, err)
	}
	return b, nil
}
