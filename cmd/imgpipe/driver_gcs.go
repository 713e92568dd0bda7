//go:build gcs || cloud

package main

import _ "github.com/imgpipe/imgpipe/blobio/gcs" // gs:// buckets, by -tags gcs or cloud
