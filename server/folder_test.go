package server

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/imgpipe/imgpipe/pipeline"
)

// folderOutput is what pipeline.Run with ToFolder writes for spec and one input, as
// imgpipe run does.
func folderOutput(t *testing.T, spec string, data []byte) []byte {
	t.Helper()
	in, out := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(in, "a.png"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	plan, err := pipeline.CompileSpec(spec)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pipeline.Run(context.Background(), plan, pipeline.Folder(in), pipeline.ToFolder(out), cpuExec().RunOptions()); err != nil {
		t.Fatal(err)
	}
	return readAll(t, filepath.Join(out, "a."+plan.Save.Ext))
}
