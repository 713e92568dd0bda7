package gcs

import (
	"slices"
	"testing"

	"github.com/imgpipe/imgpipe/blobio"
)

func TestRegistersScheme(t *testing.T) {
	if !slices.Contains(blobio.Schemes(), "gs") {
		t.Fatalf("importing the package does not register gs:// (schemes: %v)", blobio.Schemes())
	}
}
