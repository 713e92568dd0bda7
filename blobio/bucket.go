package blobio

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"
)

// Bucket is an object store as blobio uses it: keys are slash paths, and an object is
// written whole or not at all. A driver (file:// here; s3://, gs://, azblob:// in blobio/s3,
// blobio/gcs, blobio/azure) implements it and registers its scheme with Register.
type Bucket interface {
	// List returns one level of keys under prefix ("" or ending in "/"), split at "/":
	// objects, and the "folders" below as entries with IsDir (their key ends in "/").
	List(ctx context.Context, prefix string) ([]Object, error)
	// NewReader opens an object and returns its size; an error for a missing object
	// wraps fs.ErrNotExist.
	NewReader(ctx context.Context, key string) (io.ReadCloser, int64, error)
	// Attributes returns an object's size and modification time (Key and IsDir unset); an
	// error for a missing object wraps fs.ErrNotExist.
	Attributes(ctx context.Context, key string) (Object, error)
	// Exists reports whether the object is there.
	Exists(ctx context.Context, key string) (bool, error)
	// Put writes an object: an error from write, or a cancelled ctx, leaves no object.
	Put(ctx context.Context, key string, write func(io.Writer) error) error
	// Close releases the bucket.
	Close() error
}

// Object is an entry of a listing.
type Object struct {
	Key     string
	IsDir   bool
	Size    int64
	ModTime time.Time
}

// Opener opens the bucket a URL names.
type Opener func(ctx context.Context, url string) (Bucket, error)

var (
	openersMu sync.RWMutex
	openers   = map[string]Opener{"file": openFileBucket}
)

// Register makes OpenStore, Output and the rest open URLs of scheme with open; a driver
// package calls it from init. Registering a scheme twice panics, as a program error.
func Register(scheme string, open Opener) {
	openersMu.Lock()
	defer openersMu.Unlock()
	if _, dup := openers[scheme]; dup {
		panic("blobio: scheme " + scheme + ":// registered twice")
	}
	openers[scheme] = open
}

// Schemes lists the registered schemes, sorted.
func Schemes() []string {
	openersMu.RLock()
	defer openersMu.RUnlock()
	s := make([]string, 0, len(openers))
	for k := range openers {
		s = append(s, k)
	}
	slices.Sort(s)
	return s
}

func openBucket(ctx context.Context, url string) (Bucket, error) {
	scheme, _, _ := strings.Cut(url, "://")
	openersMu.RLock()
	open := openers[scheme]
	openersMu.RUnlock()
	if open == nil {
		return nil, driverError(url, scheme)
	}
	b, err := open(ctx, url)
	if err != nil {
		return nil, fmt.Errorf("bucket %s: %w", url, err)
	}
	return b, nil
}

// cloudDriver is a bucket driver that is not linked by default: together they are most of
// the command's size and of a first build's download (docs/weight.md), and a job on a local
// folder needs none. Each is a package of its own, which registers its scheme when
// imported, and a build tag of the imgpipe command.
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

// driverError says that no driver serves the scheme of url, and how to get the driver.
func driverError(url, scheme string) error {
	i := slices.IndexFunc(cloudDrivers, func(d cloudDriver) bool { return d.scheme == scheme })
	if i < 0 {
		return fmt.Errorf("bucket %s: no driver for %s:// (imgpipe knows file://, s3://, gs:// and azblob://)", url, scheme)
	}
	d := cloudDrivers[i]
	return fmt.Errorf("bucket %s: this imgpipe is built without the %s:// driver (%s): "+
		"install it with go install -tags %s github.com/imgpipe/imgpipe/cmd/imgpipe@latest "+
		"(-tags %s for every cloud driver), or in Go import _ \"github.com/imgpipe/imgpipe/%s\"",
		url, scheme, d.what, d.tag, cloudTag, d.pkg)
}
