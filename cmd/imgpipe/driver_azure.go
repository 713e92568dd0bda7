//go:build azure || cloud

package main

import _ "github.com/imgpipe/imgpipe/blobio/azure" // azblob:// buckets, by -tags azure or cloud
