//go:build cloud

package main

import (
	"testing"

	"gocloud.dev/blob"
)

// TestCloudDrivers: -tags cloud links every cloud driver.
func TestCloudDrivers(t *testing.T) {
	for _, scheme := range []string{"s3", "gs", "azblob", "file"} {
		if !blob.DefaultURLMux().ValidBucketScheme(scheme) {
			t.Errorf("-tags cloud: no %s:// driver", scheme)
		}
	}
}
