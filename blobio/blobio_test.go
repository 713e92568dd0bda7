package blobio

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/imgpipe/imgpipe/pipeline"
)

func TestIsURL(t *testing.T) {
	for _, tc := range []struct {
		loc  string
		want bool
	}{
		{"s3://bucket", true}, {"gs://b/x", true}, {"azblob://c", true}, {"file:///tmp/x", true},
		{"/tmp/x", false}, {"out", false}, {"c://x", false}, {"a/b://c", false}, {"", false},
	} {
		if got := IsURL(tc.loc); got != tc.want {
			t.Errorf("IsURL(%q) = %v, want %v", tc.loc, got, tc.want)
		}
	}
}

// tree writes files (contents are their names) and returns the folder.
func tree(t *testing.T, names ...string) string {
	t.Helper()
	dir := t.TempDir()
	for _, n := range names {
		p := filepath.Join(dir, filepath.FromSlash(n))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(n), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

type walked struct {
	Name, OutStem, Err, Data string
}

func walk(t *testing.T, src pipeline.Source, read func(pipeline.Input) string) []walked {
	t.Helper()
	var out []walked
	for {
		in, err := src.Next(context.Background())
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		w := walked{Name: in.Name, OutStem: in.OutStem, Data: read(in)}
		if in.Err != nil {
			w.Err = in.Err.Error()
		}
		out = append(out, w)
	}
}

// TestBucketWalkIsFolderWalk: a file:// bucket is walked in the folder's order, with the
// same output names and clash failures, and reads the same bytes.
func TestBucketWalkIsFolderWalk(t *testing.T) {
	dir := tree(t, "a.jpg", "a/b.png", "a.png", "a.png.jpg", "b/c/d.gif", "notes.txt", "B.PNG", "out/x.png", "z.webp")
	ctx := context.Background()
	local, err := OpenStore(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	bucket, err := OpenStore(ctx, "file://"+filepath.ToSlash(dir))
	if err != nil {
		t.Fatal(err)
	}
	defer bucket.Close()
	readFile := func(in pipeline.Input) string {
		b, _ := os.ReadFile(in.Path)
		return string(b)
	}
	readObject := func(in pipeline.Input) string {
		r, size, err := in.Open(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		b, _ := io.ReadAll(r)
		if int64(len(b)) != size {
			t.Errorf("%s: size %d, read %d", in.Name, size, len(b))
		}
		return string(b)
	}
	want := walk(t, local.Source(filepath.Join(dir, "out"), pipeline.Selection{}), readFile)
	got := walk(t, bucket.Source("out", pipeline.Selection{}), readObject)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("bucket walk:\n%+v\nfolder walk:\n%+v", got, want)
	}
	if len(want) != 7 || !strings.Contains(want[4].Err, "already that of") {
		t.Errorf("the folder walk is not what the test means: %+v", want)
	}
	// Selections pick the same inputs from both: by name at any depth, by size (the files
	// hold their names), by age.
	for _, sel := range []pipeline.Selection{
		{Include: []string{"*.png"}}, {Exclude: []string{"a/*"}}, {MinSize: 6}, {MaxSize: 5},
		{ModifiedBefore: time.Now().Add(-time.Hour)},
	} {
		want := walk(t, local.Source(filepath.Join(dir, "out"), sel), readFile)
		if got := walk(t, bucket.Source("out", sel), readObject); !reflect.DeepEqual(got, want) {
			t.Errorf("%+v: bucket walk:\n%+v\nfolder walk:\n%+v", sel, got, want)
		}
	}
	for _, st := range []Store{local, bucket} {
		size, _, err := st.Stat(ctx, "a/b.png")
		if err != nil || size != int64(len("a/b.png")) {
			t.Errorf("Stat: %d, %v", size, err)
		}
		if _, _, err := st.Stat(ctx, "missing.png"); err == nil {
			t.Error("Stat of a missing file: no error")
		}
	}
	if _, _, err := bucket.Input("missing.png").Open(ctx); err == nil || !strings.Contains(err.Error(), "no such object") {
		t.Errorf("opening a missing object: %v", err)
	}
}

func TestBucketOutput(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	url := "file://" + filepath.ToSlash(dir) + "?metadata=skip&no_tmp_dir=1"
	plan, err := pipeline.Compile(mustSpec(t, "decode | grayscale | save format=png"))
	if err != nil {
		t.Fatal(err)
	}
	in := tree(t)
	sink, closeSink, err := Output(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer closeSink()
	var rep bytes.Buffer
	inputs := pipeline.Inputs(pipeline.Input{Name: "p/x.png", Data: pngOf(t)}, pipeline.Input{Name: "../up.png", OutStem: "../up", Data: pngOf(t)})
	sum, err := pipeline.Run(ctx, plan, inputs, sink, pipeline.Options{Workers: 1, Report: &rep})
	if err != nil {
		t.Fatal(err)
	}
	if sum.OK != 1 || sum.Failed != 1 || !strings.Contains(rep.String(), "not a relative path inside the output bucket") {
		t.Errorf("summary %+v, report %s", sum, rep.String())
	}
	if _, err := os.Stat(filepath.Join(dir, "p", "x.png")); err != nil {
		t.Errorf("the output object: %v", err)
	}
	if err := WriteObject(ctx, url, "r.jsonl", func(w io.Writer) error { _, err := io.WriteString(w, "hi"); return err }); err != nil {
		t.Fatal(err)
	}
	// A failing write leaves no object.
	boom := errors.New("boom")
	if err := WriteObject(ctx, url, "half.jsonl", func(w io.Writer) error { io.WriteString(w, "ha"); return boom }); !errors.Is(err, boom) {
		t.Errorf("failing write: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "half.jsonl")); err == nil {
		t.Error("a failed write left an object")
	}
	if err := WriteObject(ctx, in, "r.jsonl", func(w io.Writer) error { _, err := io.WriteString(w, "hi"); return err }); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{filepath.Join(dir, "r.jsonl"), filepath.Join(in, "r.jsonl")} {
		if b, err := os.ReadFile(p); err != nil || string(b) != "hi" {
			t.Errorf("%s: %q, %v", p, b, err)
		}
	}
	if _, _, err := Output(ctx, "nosuchscheme://x"); err == nil {
		t.Error("an unknown scheme opened")
	}
}

// Outputs finds what is there, in a folder and in a bucket alike: a file or object, not a
// missing one; a folder's link does not count (a run never makes one).
func TestOutputs(t *testing.T) {
	dir := tree(t, "a.png", "s/b.png")
	if err := os.Symlink("a.png", filepath.Join(dir, "link.png")); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, tc := range []struct {
		loc  string
		want map[string]bool
	}{
		{dir, map[string]bool{"a.png": true, "s/b.png": true, "c.png": false, "s": false, "link.png": false}},
		{"file://" + filepath.ToSlash(dir), map[string]bool{"a.png": true, "s/b.png": true, "c.png": false, "s": false}},
	} {
		has, closeOut, err := Outputs(ctx, tc.loc)
		if err != nil {
			t.Fatal(err)
		}
		for name, want := range tc.want {
			if got := has(ctx, name); got != want {
				t.Errorf("%s: has(%q) = %v, want %v", tc.loc, name, got, want)
			}
		}
		if err := closeOut(); err != nil {
			t.Error(err)
		}
	}
	if _, _, err := Outputs(ctx, "nosuch://x"); err == nil {
		t.Error("an unknown scheme: no error")
	}
}

// CopyObject copies an object whole, says when there is none, and reports a bad bucket.
func TestCopyObject(t *testing.T) {
	dir := tree(t, "r.jsonl", "s/x")
	url := "file://" + filepath.ToSlash(dir)
	ctx := context.Background()
	for _, tc := range []struct {
		loc, name string
		found     bool
		data      string
		err       bool
	}{
		{url, "r.jsonl", true, "r.jsonl", false},
		{url, "s/x", true, "s/x", false},
		{url, "none.jsonl", false, "", false},
		{"nosuch://x", "r.jsonl", false, "", true},
	} {
		var b bytes.Buffer
		found, err := CopyObject(ctx, tc.loc, tc.name, &b)
		if found != tc.found || b.String() != tc.data || (err != nil) != tc.err {
			t.Errorf("CopyObject(%s, %s) = %v, %q, %v; want %v, %q, error %v", tc.loc, tc.name, found, b.String(), err, tc.found, tc.data, tc.err)
		}
	}
}
