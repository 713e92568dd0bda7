package pipeline

import (
	"go/build"
	"strings"
	"testing"
)

// The engine core reaches a GPU only through its backend seam (Options.Backend): of the
// GPU packages it imports cudastage/sched, the contract with the executor, and no memory
// pool, no device binding and not its own GPU backend, package pipeline/gpu.
func TestImportsNoGPUPackage(t *testing.T) {
	pkg, err := build.ImportDir(".", 0)
	if err != nil {
		t.Fatal(err)
	}
	const mod = "github.com/imgpipe/imgpipe/"
	allowed := map[string]bool{
		mod + "cudastage/sched": true,
		// The kernel stage's, until it registers itself from its own package.
		mod + "cudastage/cu": true, mod + "cudastage/nvrtc": true, mod + "cudastage/userkernel": true,
	}
	for _, p := range pkg.Imports {
		gpu := strings.HasPrefix(p, mod+"cudastage/") || strings.HasPrefix(p, mod+"memory/") || strings.HasPrefix(p, mod+"pipeline/")
		if gpu && !allowed[p] {
			t.Errorf("package pipeline imports %s", p)
		}
	}
}
