// Package cdk serves blobio's bucket URLs through the Go CDK (gocloud.dev/blob): the cloud
// driver packages blobio/s3, blobio/gcs and blobio/azure import a Go CDK driver and
// register its scheme here. Only they import it, so that a program without cloud buckets
// links none of the Go CDK and its dependencies.
package cdk

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"

	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"

	"github.com/imgpipe/imgpipe/blobio"
)

// Register makes blobio open URLs of scheme with blob.OpenBucket, whose driver the caller
// has imported.
func Register(scheme string) {
	blobio.Register(scheme, func(ctx context.Context, url string) (blobio.Bucket, error) {
		b, err := blob.OpenBucket(ctx, url)
		if err != nil {
			return nil, err
		}
		return bucket{b}, nil
	})
}

type bucket struct{ b *blob.Bucket }

// notExist makes a Go CDK "not found" error wrap fs.ErrNotExist, as blobio.Bucket says.
func notExist(err error) error {
	if gcerrors.Code(err) == gcerrors.NotFound {
		return fmt.Errorf("%w: %w", fs.ErrNotExist, err)
	}
	return err
}

func (b bucket) List(ctx context.Context, prefix string) ([]blobio.Object, error) {
	it := b.b.List(&blob.ListOptions{Prefix: prefix, Delimiter: "/"})
	var out []blobio.Object
	for {
		o, err := it.Next(ctx)
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		out = append(out, blobio.Object{Key: o.Key, IsDir: o.IsDir, Size: o.Size, ModTime: o.ModTime})
	}
}

func (b bucket) NewReader(ctx context.Context, key string) (io.ReadCloser, int64, error) {
	r, err := b.b.NewReader(ctx, key, nil)
	if err != nil {
		return nil, 0, notExist(err)
	}
	return r, r.Size(), nil
}

func (b bucket) Attributes(ctx context.Context, key string) (blobio.Object, error) {
	a, err := b.b.Attributes(ctx, key)
	if err != nil {
		return blobio.Object{}, notExist(err)
	}
	return blobio.Object{Size: a.Size, ModTime: a.ModTime}, nil
}

func (b bucket) Exists(ctx context.Context, key string) (bool, error) { return b.b.Exists(ctx, key) }

// Put writes through a Go CDK writer: closing it commits the object; cancelling its
// context before that abandons it, so no partial object is ever visible.
func (b bucket) Put(ctx context.Context, key string, write func(io.Writer) error) error {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w, err := b.b.NewWriter(wctx, key, nil)
	if err != nil {
		return err
	}
	if err := write(w); err != nil {
		cancel() // abandons the write
		w.Close()
		return err
	}
	return w.Close()
}

func (b bucket) Close() error { return b.b.Close() }
