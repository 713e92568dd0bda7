package pipeline

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/imgpipe/imgpipe/stages"
)

// ToFolder writes every name that stays inside the folder, names starting with ".." among
// them, and refuses the ones that would leave it.
func TestFolderSinkOutputNames(t *testing.T) {
	enc := &Encoder{Ext: "txt", Encode: func(w io.Writer, _ *stages.Image) error {
		_, err := io.WriteString(w, "out")
		return err
	}}
	tests := []struct {
		name string
		ok   bool
	}{
		{"a.png", true},
		{"..a.png", true},
		{"sub/..b.png", true},
		{"...png", true},
		{"sub/../c.png", true}, // cleans to c.png, still inside
		{"", false},
		{"..", false},
		{"../x.png", false},
		{"sub/../../x.png", false},
		{"/abs.png", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			dir := filepath.Join(root, "out")
			r := &Result{Output: tt.name, Image: stages.NewImage(1, 1, 3)}
			err := ToFolder(dir).Write(context.Background(), r, enc)
			if !tt.ok {
				if err == nil || !strings.Contains(err.Error(), "is not a relative path inside the output folder") {
					t.Fatalf("got %v, want a refusal", err)
				}
				if _, err := os.Stat(filepath.Join(root, "x.png")); err == nil {
					t.Error("wrote outside the output folder")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(tt.name)))
			if err != nil || string(got) != "out" {
				t.Errorf("read back %q, %v", got, err)
			}
		})
	}
}
