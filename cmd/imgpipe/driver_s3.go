//go:build s3 || cloud

package main

import _ "github.com/imgpipe/imgpipe/blobio/s3" // s3:// buckets, by -tags s3 or cloud
