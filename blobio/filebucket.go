package blobio

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/imgpipe/imgpipe/stages"
)

// fileBucket is file:///path: a local folder seen as a bucket (for tests and shared file
// systems). It is blobio's own, not the Go CDK's fileblob, so that a build without cloud
// drivers links no cloud library. Objects are regular files; writes are atomic renames
// inside the folder (stages.WriteFileAtomicIn), never through a link.
type fileBucket struct {
	root   *os.Root
	prefix string // of every key: the URL's prefix parameter, "" or ending in "/"
}

// fileParams are the query parameters a file:// URL may hold. Those of the Go CDK's
// fileblob that ask for its defaults' opposite (metadata=skip, no_tmp_dir) are accepted,
// since this bucket writes no metadata files and stages each write beside its object.
var fileParams = map[string]bool{"prefix": true, "create_dir": true, "metadata": true, "no_tmp_dir": true}

func openFileBucket(_ context.Context, loc string) (Bucket, error) {
	u, err := url.Parse(loc)
	if err != nil {
		return nil, err
	}
	if u.Host != "" && u.Host != "localhost" {
		return nil, errors.New("want file:///absolute/path (three slashes)")
	}
	q := u.Query()
	for k := range q {
		if !fileParams[k] {
			return nil, fmt.Errorf("unknown parameter %q (file:// takes prefix, create_dir, metadata, no_tmp_dir)", k)
		}
	}
	prefix := q.Get("prefix")
	if prefix != "" && (!strings.HasSuffix(prefix, "/") || !filepath.IsLocal(filepath.FromSlash(prefix))) {
		return nil, fmt.Errorf("prefix %q: want a relative folder ending in /", prefix)
	}
	dir := filepath.FromSlash(u.Path)
	if q.Has("create_dir") {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	return &fileBucket{root: root, prefix: prefix}, nil
}

// name is the path inside the folder of key, which must be a relative path inside it.
func (b *fileBucket) name(key string) (string, error) {
	if !filepath.IsLocal(filepath.FromSlash(key)) || strings.HasSuffix(key, "/") {
		return "", fmt.Errorf("key %q is not a relative path inside the bucket", key)
	}
	return b.prefix + key, nil
}

func (b *fileBucket) List(_ context.Context, prefix string) ([]Object, error) {
	dir := strings.TrimSuffix(b.prefix+prefix, "/")
	if dir == "" {
		dir = "."
	}
	f, err := b.root.Open(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil // an object store has no empty folders: nothing under prefix
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	entries, err := f.ReadDir(-1)
	if err != nil {
		return nil, err
	}
	var out []Object
	for _, e := range entries {
		key := prefix + e.Name()
		switch {
		case e.IsDir():
			out = append(out, Object{Key: key + "/", IsDir: true})
		case !strings.HasSuffix(e.Name(), ".attrs"): // fileblob's metadata files
			// A link, FIFO or device is listed too, as a folder walk yields it: a link to a
			// file is read through (its target's size), anything else fails as an input
			// with its reason instead of vanishing from the run.
			fi, err := e.Info()
			if e.Type()&fs.ModeSymlink != 0 {
				if target, err := b.root.Stat(path.Join(dir, e.Name())); err == nil {
					fi = target
				}
			}
			if err != nil {
				continue // gone since the listing
			}
			out = append(out, Object{Key: key, Size: fi.Size(), ModTime: fi.ModTime()})
		}
	}
	return out, nil
}

func (b *fileBucket) NewReader(_ context.Context, key string) (io.ReadCloser, int64, error) {
	name, err := b.name(key)
	if err != nil {
		return nil, 0, err
	}
	f, err := b.root.Open(name)
	if err != nil {
		return nil, 0, err
	}
	fi, err := f.Stat()
	if err == nil && !fi.Mode().IsRegular() {
		err = &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
	}
	if err != nil {
		f.Close()
		return nil, 0, err
	}
	return f, fi.Size(), nil
}

func (b *fileBucket) Attributes(_ context.Context, key string) (Object, error) {
	name, err := b.name(key)
	if err != nil {
		return Object{}, err
	}
	fi, err := b.root.Stat(name)
	if err == nil && !fi.Mode().IsRegular() {
		err = &fs.PathError{Op: "stat", Path: name, Err: fs.ErrNotExist}
	}
	if err != nil {
		return Object{}, err
	}
	return Object{Size: fi.Size(), ModTime: fi.ModTime()}, nil
}

func (b *fileBucket) Exists(ctx context.Context, key string) (bool, error) {
	_, err := b.Attributes(ctx, key)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	return err == nil, err
}

func (b *fileBucket) Put(ctx context.Context, key string, write func(io.Writer) error) error {
	name, err := b.name(key)
	if err != nil {
		return err
	}
	return stages.WriteFileAtomicIn(b.root, path.Clean(name), func(w io.Writer) error {
		if err := write(w); err != nil {
			return err
		}
		return ctx.Err() // a cancelled write commits nothing, as in an object store
	})
}

func (b *fileBucket) Close() error { return b.root.Close() }
