package s3

import (
	"slices"
	"testing"

	"github.com/imgpipe/imgpipe/blobio"
)

func TestRegistersScheme(t *testing.T) {
	if !slices.Contains(blobio.Schemes(), "s3") {
		t.Fatalf("importing the package does not register s3:// (schemes: %v)", blobio.Schemes())
	}
}
