package cdk

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"slices"
	"strings"
	"testing"

	"gocloud.dev/blob/memblob"

	"github.com/imgpipe/imgpipe/blobio"
)

// TestBucket: the adapter keeps blobio.Bucket's contract over a Go CDK bucket (memblob,
// the CDK's in-memory driver): one listing level, not-exist errors, whole-or-no writes.
func TestBucket(t *testing.T) {
	ctx := context.Background()
	b := bucket{memblob.OpenBucket(nil)}
	defer b.Close()
	put := func(key, data string) error {
		return b.Put(ctx, key, func(w io.Writer) error { _, err := io.WriteString(w, data); return err })
	}
	for _, k := range []string{"a.png", "s/b.png", "s/t/c.png"} {
		if err := put(k, k); err != nil {
			t.Fatal(err)
		}
	}
	boom := errors.New("boom")
	if err := b.Put(ctx, "half.png", func(w io.Writer) error { io.WriteString(w, "x"); return boom }); !errors.Is(err, boom) {
		t.Errorf("failing Put: %v", err)
	}
	for _, tc := range []struct {
		prefix string
		want   []string
	}{{"", []string{"a.png", "s/"}}, {"s/", []string{"s/b.png", "s/t/"}}, {"none/", nil}} {
		objs, err := b.List(ctx, tc.prefix)
		if err != nil {
			t.Fatal(err)
		}
		var keys []string
		for _, o := range objs {
			keys = append(keys, o.Key)
			if o.IsDir != strings.HasSuffix(o.Key, "/") || (!o.IsDir && o.Size != int64(len(o.Key))) {
				t.Errorf("%+v", o)
			}
		}
		if !slices.Equal(keys, tc.want) {
			t.Errorf("List(%q) = %v, want %v", tc.prefix, keys, tc.want)
		}
	}
	r, size, err := b.NewReader(ctx, "s/b.png")
	if err != nil {
		t.Fatal(err)
	}
	data, _ := io.ReadAll(r)
	r.Close()
	if string(data) != "s/b.png" || size != 7 {
		t.Errorf("read %q, size %d", data, size)
	}
	if a, err := b.Attributes(ctx, "a.png"); err != nil || a.Size != 5 || a.ModTime.IsZero() {
		t.Errorf("Attributes: %+v, %v", a, err)
	}
	for _, key := range []string{"half.png", "missing.png"} {
		if _, _, err := b.NewReader(ctx, key); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("NewReader(%q): %v, want not-exist", key, err)
		}
		if _, err := b.Attributes(ctx, key); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("Attributes(%q): %v, want not-exist", key, err)
		}
		if ok, err := b.Exists(ctx, key); ok || err != nil {
			t.Errorf("Exists(%q) = %v, %v", key, ok, err)
		}
	}
}

// TestRegister: a registered scheme opens through blob.OpenBucket; a bad URL of it fails
// naming the bucket.
func TestRegister(t *testing.T) {
	if !slices.Contains(blobio.Schemes(), "mem") { // registered once per test binary (-count)
		Register("mem")
	}
	if !slices.Contains(blobio.Schemes(), "mem") {
		t.Fatalf("schemes %v", blobio.Schemes())
	}
	ctx := context.Background()
	if _, closeOut, err := blobio.Outputs(ctx, "mem://"); err != nil {
		t.Fatal(err)
	} else {
		closeOut()
	}
	if _, err := blobio.OpenStore(ctx, "mem://?nosuchparam=1"); err == nil || !strings.Contains(err.Error(), "bucket mem://?nosuchparam=1") {
		t.Errorf("bad mem:// URL: %v", err)
	}
}
