package azure

import (
	"testing"

	"gocloud.dev/blob"
)

func TestRegistersScheme(t *testing.T) {
	if !blob.DefaultURLMux().ValidBucketScheme("azblob") {
		t.Fatal("importing the package does not register azblob://")
	}
}
