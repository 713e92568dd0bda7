package gcs

import (
	"testing"

	"gocloud.dev/blob"
)

func TestRegistersScheme(t *testing.T) {
	if !blob.DefaultURLMux().ValidBucketScheme("gs") {
		t.Fatal("importing the package does not register gs://")
	}
}
