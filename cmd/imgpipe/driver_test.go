//go:build !s3 && !gcs && !azure && !cloud

package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestNoCloudDriver: the default build links no cloud driver, so a bucket URL of one fails
// at once (exit 3), on input and output alike, saying how to get a build that has it.
func TestNoCloudDriver(t *testing.T) {
	in, out := t.TempDir(), filepath.Join(t.TempDir(), "out")
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"-i", "s3://photos?region=eu-west-1", "-o", out}, []string{"imgpipe: input: bucket s3://photos?region=eu-west-1: this imgpipe is built without the s3:// driver", "go install -tags s3 github.com/imgpipe/imgpipe/cmd/imgpipe@latest"}},
		{[]string{"-i", in, "-o", "gs://thumbs"}, []string{"imgpipe: output: bucket gs://thumbs: this imgpipe is built without the gs:// driver", "-tags gcs", "-tags cloud"}},
		{[]string{"-i", "azblob://c", "-o", out, "--dry-run"}, []string{"without the azblob:// driver", "-tags azure"}},
	} {
		code, stdout, stderr := cli(t, append([]string{"run", "-p", "decode | save", "--device", "cpu"}, tc.args...)...)
		if code != exitFatal || stdout != "" {
			t.Errorf("%v: exit %d, stdout %q; want exit %d", tc.args, code, stdout, exitFatal)
		}
		for _, w := range tc.want {
			if !strings.Contains(stderr, w) {
				t.Errorf("%v: stderr lacks %q:\n%s", tc.args, w, stderr)
			}
		}
	}
}
