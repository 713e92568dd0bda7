package blobio

import (
	"fmt"
	"slices"
	"strings"

	"gocloud.dev/blob"
	_ "gocloud.dev/blob/fileblob" // file://: small, and what tests and shared file systems use
)

// cloudDriver is a bucket driver that is not linked by default: together they are most of
// the command's size and of a first build's download (docs/weight.md), and a job on a local
// folder needs none. Each is a package of its own, which registers its scheme with
// blob.OpenBucket when imported, and a build tag of the imgpipe command.
type cloudDriver struct {
	scheme, pkg, tag, what string
}

var cloudDrivers = []cloudDriver{
	{"s3", "blobio/s3", "s3", "AWS S3 and compatible stores"},
	{"gs", "blobio/gcs", "gcs", "Google Cloud Storage"},
	{"azblob", "blobio/azure", "azure", "Azure Blob Storage"},
}

// cloudTag is the build tag of the imgpipe command that links every cloud driver.
const cloudTag = "cloud"

// driverError says why the bucket URL loc cannot be opened when no driver serves its
// scheme, and how to get the driver; nil when one does.
func driverError(loc string) error {
	scheme, _, _ := strings.Cut(loc, "://")
	if blob.DefaultURLMux().ValidBucketScheme(scheme) {
		return nil
	}
	i := slices.IndexFunc(cloudDrivers, func(d cloudDriver) bool { return d.scheme == scheme })
	if i < 0 {
		return fmt.Errorf("bucket %s: no driver for %s:// (imgpipe knows file://, s3://, gs:// and azblob://)", loc, scheme)
	}
	d := cloudDrivers[i]
	return fmt.Errorf("bucket %s: this imgpipe is built without the %s:// driver (%s): "+
		"install it with go install -tags %s github.com/imgpipe/imgpipe/cmd/imgpipe@latest "+
		"(-tags %s for every cloud driver), or in Go import _ \"github.com/imgpipe/imgpipe/%s\"",
		loc, scheme, d.what, d.tag, cloudTag, d.pkg)
}
