package blobio

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestFileBucketURL(t *testing.T) {
	dir := tree(t, "p/a.png")
	base := "file://" + filepath.ToSlash(dir)
	for _, tc := range []struct {
		url, err string
	}{
		{base, ""},
		{base + "?metadata=skip&no_tmp_dir=1", ""},
		{base + "?prefix=p/", ""},
		{"file://localhost" + filepath.ToSlash(dir), ""},
		{base + "/new/folder?create_dir=1", ""},
		{base + "/missing", "no such file"},
		{"file://host/x", "three slashes"},
		{base + "?colour=red", `unknown parameter "colour"`},
		{base + "?prefix=p", `prefix "p": want a relative folder ending in /`},
		{base + "?prefix=../", `prefix "../"`},
	} {
		b, err := openFileBucket(context.Background(), tc.url)
		if tc.err == "" {
			if err != nil {
				t.Errorf("%s: %v", tc.url, err)
				continue
			}
			b.Close()
		} else if err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%s: %v, want %q", tc.url, err, tc.err)
		}
	}
}

func TestFileBucket(t *testing.T) {
	ctx := context.Background()
	dir := tree(t, "p/a.png", "p/a.png.attrs", "p/s/b.png", "top.png")
	if err := os.Symlink("top.png", filepath.Join(dir, "p", "link.png")); err != nil {
		t.Fatal(err)
	}
	b, err := openFileBucket(ctx, "file://"+filepath.ToSlash(dir)+"?prefix=p/")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	objs, err := b.List(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, o := range objs {
		keys = append(keys, o.Key)
		if want := int64(len("p/" + o.Key)); o.Key == "link.png" {
			if o.Size != int64(len("top.png")) {
				t.Errorf("%s: size %d, want its target's", o.Key, o.Size)
			}
		} else if !o.IsDir && o.Size != want {
			t.Errorf("%s: size %d", o.Key, o.Size)
		}
	}
	slices.Sort(keys)                                                           // a listing is in the folder's order
	if want := []string{"a.png", "link.png", "s/"}; !slices.Equal(keys, want) { // no metadata file; a link, as a folder walk yields it
		t.Errorf("List = %v, want %v", keys, want)
	}
	if objs, err := b.List(ctx, "none/"); err != nil || len(objs) != 0 {
		t.Errorf("List of a missing folder: %v, %v", objs, err)
	}
	for _, key := range []string{"missing.png", "s"} {
		if _, _, err := b.NewReader(ctx, key); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("NewReader(%q): %v, want not-exist", key, err)
		}
		if ok, err := b.Exists(ctx, key); ok || err != nil {
			t.Errorf("Exists(%q) = %v, %v", key, ok, err)
		}
	}
	for _, key := range []string{"../top.png", "/etc/passwd", "s/"} {
		if _, _, err := b.NewReader(ctx, key); err == nil || !strings.Contains(err.Error(), "not a relative path inside the bucket") {
			t.Errorf("NewReader(%q): %v", key, err)
		}
		if err := b.Put(ctx, key, func(io.Writer) error { return nil }); err == nil {
			t.Errorf("Put(%q): no error", key)
		}
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if err := b.Put(cancelled, "c.png", func(w io.Writer) error { _, err := io.WriteString(w, "x"); return err }); !errors.Is(err, context.Canceled) {
		t.Errorf("Put with a cancelled context: %v", err)
	}
	if err := b.Put(ctx, "new/d.png", func(w io.Writer) error { _, err := io.WriteString(w, "d"); return err }); err != nil {
		t.Fatal(err)
	}
	r, size, err := b.NewReader(ctx, "new/d.png")
	if err != nil {
		t.Fatal(err)
	}
	data, _ := io.ReadAll(r)
	r.Close()
	if size != 1 || string(data) != "d" {
		t.Errorf("read back %q (size %d)", data, size)
	}
	if _, err := os.Stat(filepath.Join(dir, "p", "c.png")); err == nil {
		t.Error("a cancelled Put left an object")
	}
}
