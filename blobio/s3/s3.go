// Package s3 adds s3:// buckets (AWS S3 and compatible stores) to package blobio when imported:
//
//	import _ "github.com/imgpipe/imgpipe/blobio/s3"
//
// The imgpipe command links it when built with -tags s3 (or -tags cloud).
package s3

import (
	_ "gocloud.dev/blob/s3blob" // the Go CDK's s3:// driver

	"github.com/imgpipe/imgpipe/blobio/cdk"
)

func init() { cdk.Register("s3") }
