// Package gcs adds gs:// buckets (Google Cloud Storage) to package blobio when imported:
//
//	import _ "github.com/imgpipe/imgpipe/blobio/gcs"
//
// The imgpipe command links it when built with -tags gcs (or -tags cloud).
package gcs

import (
	_ "gocloud.dev/blob/gcsblob" // the Go CDK's gs:// driver

	"github.com/imgpipe/imgpipe/blobio/cdk"
)

func init() { cdk.Register("gs") }
