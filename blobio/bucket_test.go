package blobio

import (
	"context"
	"slices"
	"strings"
	"testing"
)

// TestMissingDriver: blobio links only file://, so a cloud URL fails before any network,
// at every entry point, saying how to get its driver; an unknown scheme names those known.
func TestMissingDriver(t *testing.T) {
	ctx := context.Background()
	open := map[string]func(loc string) error{
		"OpenStore": func(loc string) error { _, err := OpenStore(ctx, loc); return err },
		"Output":    func(loc string) error { _, _, err := Output(ctx, loc); return err },
		"Outputs":   func(loc string) error { _, _, err := Outputs(ctx, loc); return err },
		"CopyObject": func(loc string) error {
			_, err := CopyObject(ctx, loc, "x", nil)
			return err
		},
	}
	for _, tc := range []struct {
		loc  string
		want []string
	}{
		{"s3://bucket?region=eu-west-1", []string{"bucket s3://bucket?region=eu-west-1: this imgpipe is built without the s3:// driver", "go install -tags s3 github.com/imgpipe/imgpipe/cmd/imgpipe@latest", "-tags cloud", `import _ "github.com/imgpipe/imgpipe/blobio/s3"`}},
		{"gs://b", []string{"without the gs:// driver (Google Cloud Storage)", "-tags gcs", "blobio/gcs"}},
		{"azblob://c", []string{"without the azblob:// driver (Azure Blob Storage)", "-tags azure", "blobio/azure"}},
		{"ftp://host/x", []string{"bucket ftp://host/x: no driver for ftp://", "file://, s3://, gs:// and azblob://"}},
	} {
		for name, f := range open {
			err := f(tc.loc)
			if err == nil {
				t.Errorf("%s(%q): no error", name, tc.loc)
				continue
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%s(%q) = %q, want it to say %q", name, tc.loc, err, w)
				}
			}
		}
	}
	if got := Schemes(); !slices.Equal(got, []string{"file"}) {
		t.Errorf("Schemes() = %v, want only the built-in file", got)
	}
}
