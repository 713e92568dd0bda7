package s3

import (
	"testing"

	"gocloud.dev/blob"
)

func TestRegistersScheme(t *testing.T) {
	if !blob.DefaultURLMux().ValidBucketScheme("s3") {
		t.Fatal("importing the package does not register s3://")
	}
}
