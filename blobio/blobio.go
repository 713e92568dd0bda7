// Package blobio lets imgpipe's input and output folders be buckets of an object store,
// named by URL: file:///path (a local folder used as a bucket), and, once their driver
// packages are imported (blobio/s3, blobio/gcs, blobio/azure, through the Go CDK),
// s3://BUCKET?region=R, gs://BUCKET and azblob://CONTAINER. A URL may hold a
// prefix parameter (s3://b?prefix=photos/) to work under a "folder" of the bucket. Workers
// on different machines then read and write the same place. An object write is atomic by
// nature: a reader sees the whole object or none.
//
// Store and Output take a plain path as well, so callers treat both alike.
package blobio

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/imgpipe/imgpipe/pipeline"
	"github.com/imgpipe/imgpipe/stages"
)

// IsURL reports whether loc names a bucket (SCHEME://...) rather than a local folder.
func IsURL(loc string) bool {
	scheme, _, ok := strings.Cut(loc, "://")
	return ok && len(scheme) > 1 && !strings.ContainsAny(scheme, `/\`)
}

// Store is where a job's input files are: a local folder or a bucket.
type Store interface {
	// Source walks the store's image files in pipeline.Folder's order, with its output
	// names; exclude is a folder (or prefix) not to enter, "" for none.
	// sel picks the files (the zero Selection: image names).
	Source(exclude string, sel pipeline.Selection) pipeline.Source
	// Input is the input of one file, by its relative slash path.
	Input(name string) pipeline.Input
	// Stat returns a file's size and modification time.
	Stat(ctx context.Context, name string) (int64, time.Time, error)
	// Close releases the store.
	Close() error
}

// OpenStore opens loc, a folder path or a bucket URL, for reading inputs.
func OpenStore(ctx context.Context, loc string) (Store, error) {
	if !IsURL(loc) {
		return dirStore(loc), nil
	}
	b, err := openBucket(ctx, loc)
	if err != nil {
		return nil, err
	}
	return &bucketStore{b: b}, nil
}

// Output opens loc, a folder path or a bucket URL, as the sink of a run's outputs; close
// releases it.
func Output(ctx context.Context, loc string) (sink pipeline.Sink, close func() error, err error) {
	if !IsURL(loc) {
		return pipeline.ToFolder(loc), func() error { return nil }, nil
	}
	b, err := openBucket(ctx, loc)
	if err != nil {
		return nil, nil, err
	}
	return bucketSink{b: b}, b.Close, nil
}

// WriteObject writes data as the object name of the bucket loc, or as the file loc/name
// when loc is a folder (atomically, like every output).
func WriteObject(ctx context.Context, loc, name string, write func(io.Writer) error) error {
	sink, closeSink, err := Output(ctx, loc)
	if err != nil {
		return err
	}
	defer closeSink()
	if bs, ok := sink.(bucketSink); ok {
		return bs.put(ctx, name, write)
	}
	return stages.WriteFileAtomic(filepath.Join(loc, filepath.FromSlash(name)), write)
}

// Outputs is the check --resume makes on an earlier run's outputs in loc, a folder path
// or a bucket URL: in a bucket, that the object exists (an object is whole or absent);
// close releases the bucket.
func Outputs(ctx context.Context, loc string) (has pipeline.OutputCheck, close func() error, err error) {
	if !IsURL(loc) {
		return pipeline.FolderOutputs(loc), func() error { return nil }, nil
	}
	b, err := openBucket(ctx, loc)
	if err != nil {
		return nil, nil, err
	}
	return func(ctx context.Context, key string) bool {
		ok, err := b.Exists(ctx, key)
		return err == nil && ok
	}, b.Close, nil
}

// CopyObject copies the object name of the bucket loc into w. found is false, with no
// error, when there is no such object.
func CopyObject(ctx context.Context, loc, name string, w io.Writer) (found bool, err error) {
	b, err := openBucket(ctx, loc)
	if err != nil {
		return false, err
	}
	defer b.Close()
	r, _, err := b.NewReader(ctx, name)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	defer r.Close()
	_, err = io.Copy(w, r)
	return true, err
}

type dirStore string

func (d dirStore) Source(exclude string, sel pipeline.Selection) pipeline.Source {
	if exclude == "" || IsURL(exclude) {
		return pipeline.FolderSelect(string(d), sel)
	}
	return pipeline.FolderSelect(string(d), sel, exclude)
}

func (d dirStore) Input(name string) pipeline.Input {
	return pipeline.Input{Name: name, Path: filepath.Join(string(d), filepath.FromSlash(name))}
}

func (d dirStore) Stat(_ context.Context, name string) (int64, time.Time, error) {
	fi, err := os.Stat(filepath.Join(string(d), filepath.FromSlash(name)))
	if err != nil {
		return 0, time.Time{}, err
	}
	return fi.Size(), fi.ModTime().UTC(), nil
}

func (dirStore) Close() error { return nil }

type bucketStore struct{ b Bucket }

func (s *bucketStore) Input(name string) pipeline.Input {
	return pipeline.Input{Name: name, Open: func(ctx context.Context) (io.ReadCloser, int64, error) {
		r, size, err := s.b.NewReader(ctx, name)
		if err != nil {
			return nil, 0, objectError(err)
		}
		return r, size, nil
	}}
}

func (s *bucketStore) Stat(ctx context.Context, name string) (int64, time.Time, error) {
	a, err := s.b.Attributes(ctx, name)
	if err != nil {
		return 0, time.Time{}, objectError(err)
	}
	return a.Size, a.ModTime.UTC(), nil
}

func (s *bucketStore) Close() error { return s.b.Close() }

// objectError says what became of an object without the driver's long text when the
// reason is a plain one.
func objectError(err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return errors.New("open: no such object")
	}
	return err
}

// Source walks the bucket like pipeline.Folder walks a folder: one listing per "folder"
// level (keys split at '/'), entries sorted by name, subfolders walked where they sort,
// the keys sel takes (matched on their path below the bucket's prefix), output names by
// pipeline.OutStems.
func (s *bucketStore) Source(exclude string, sel pipeline.Selection) pipeline.Source {
	return &bucketSource{s: s, exclude: strings.Trim(exclude, "/"), sel: sel}
}

type bucketSource struct {
	s       *bucketStore
	exclude string
	sel     pipeline.Selection
	stack   []*level
	started bool
}

type level struct {
	rel     string
	entries []entry
	i       int
}

type entry struct {
	name    string
	dir     bool
	size    int64
	modTime time.Time
	outStem string
	err     error
}

func (src *bucketSource) Next(ctx context.Context) (pipeline.Input, error) {
	if !src.started {
		src.started = true
		l, err := src.list(ctx, "")
		if err != nil {
			return pipeline.Input{}, fmt.Errorf("input bucket: %w", err)
		}
		src.stack = append(src.stack, l)
	}
	for len(src.stack) > 0 {
		if err := ctx.Err(); err != nil {
			return pipeline.Input{}, err
		}
		top := src.stack[len(src.stack)-1]
		if top.i >= len(top.entries) {
			src.stack = src.stack[:len(src.stack)-1]
			continue
		}
		e := top.entries[top.i]
		top.i++
		rel := path.Join(top.rel, e.name)
		if !e.dir {
			in := src.s.Input(rel)
			in.OutStem, in.Err = e.outStem, e.err
			in.Size, in.ModTime = e.size, e.modTime
			return in, nil
		}
		if rel == src.exclude {
			continue
		}
		l, err := src.list(ctx, rel)
		if err != nil {
			return pipeline.Input{Name: rel + "/", Err: fmt.Errorf("list: %w", err)}, nil
		}
		src.stack = append(src.stack, l)
	}
	return pipeline.Input{}, io.EOF
}

// list reads one level of the bucket and works out its image files' output stems.
func (src *bucketSource) list(ctx context.Context, rel string) (*level, error) {
	prefix := ""
	if rel != "" {
		prefix = rel + "/"
	}
	l := &level{rel: rel}
	objs, err := src.s.b.List(ctx, prefix)
	if err != nil {
		return nil, err
	}
	for _, o := range objs {
		name := strings.TrimSuffix(strings.TrimPrefix(o.Key, prefix), "/")
		if name == "" || strings.Contains(name, "/") {
			continue // a "folder" marker object, or a key the delimiter did not split
		}
		if o.IsDir || (src.sel.Takes(path.Join(rel, name)) && src.sel.TakesInfo(o.Size, o.ModTime)) {
			l.entries = append(l.entries, entry{name: name, dir: o.IsDir, size: o.Size, modTime: o.ModTime})
		}
	}
	// Keys list in byte order with '/' after folders' names ("a.jpg" before "a/"); a
	// folder walk puts the folder "a" first. Sort by name as the folder walk does.
	sort.SliceStable(l.entries, func(i, j int) bool { return l.entries[i].name < l.entries[j].name })
	var names []string
	var files []*entry
	for i := range l.entries {
		if e := &l.entries[i]; !e.dir {
			names, files = append(names, e.name), append(files, e)
		}
	}
	stems, errs := pipeline.OutStems(rel, names)
	for i, e := range files {
		e.outStem, e.err = stems[i], errs[i]
	}
	return l, nil
}

// bucketSink writes each output as an object at its Result.Output key.
type bucketSink struct{ b Bucket }

func (s bucketSink) Write(ctx context.Context, r *pipeline.Result, enc *pipeline.Encoder) error {
	m := r.Image
	r.Image = nil
	if enc == nil {
		return errors.New("the chain has no save stage, so a bucket output would get nothing: end it with save")
	}
	if !filepath.IsLocal(filepath.FromSlash(r.Output)) {
		return fmt.Errorf("output name %q is not a relative path inside the output bucket", r.Output)
	}
	return s.put(ctx, r.Output, func(w io.Writer) error { return enc.Encode(w, m) })
}

func (bucketSink) Done(context.Context, *pipeline.Result) error { return nil }

// put writes one object whole, or none on an error or a cancelled ctx.
func (s bucketSink) put(ctx context.Context, key string, write func(io.Writer) error) error {
	return s.b.Put(ctx, key, write)
}
