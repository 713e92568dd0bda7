package azure

import (
	"slices"
	"testing"

	"github.com/imgpipe/imgpipe/blobio"
)

func TestRegistersScheme(t *testing.T) {
	if !slices.Contains(blobio.Schemes(), "azblob") {
		t.Fatalf("importing the package does not register azblob:// (schemes: %v)", blobio.Schemes())
	}
}
