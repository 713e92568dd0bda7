// Package azure adds azblob:// buckets (Azure Blob Storage) to package blobio when imported:
//
//	import _ "github.com/imgpipe/imgpipe/blobio/azure"
//
// The imgpipe command links it when built with -tags azure (or -tags cloud).
package azure

import (
	_ "gocloud.dev/blob/azureblob" // the Go CDK's azblob:// driver

	"github.com/imgpipe/imgpipe/blobio/cdk"
)

func init() { cdk.Register("azblob") }
