//go:build cloud

package main

import (
	"slices"
	"testing"

	"github.com/imgpipe/imgpipe/blobio"
)

// TestCloudDrivers: -tags cloud links every cloud driver.
func TestCloudDrivers(t *testing.T) {
	if got, want := blobio.Schemes(), []string{"azblob", "file", "gs", "s3"}; !slices.Equal(got, want) {
		t.Errorf("-tags cloud: schemes %v, want %v", got, want)
	}
}
