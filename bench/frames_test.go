package bench

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestLoadFramesFile(t *testing.T) {
	dir := t.TempDir()
	frame := 4 * 3 * 3
	good := make([]byte, 2*frame)
	for i := range good {
		good[i] = byte(i*7 + 1)
	}
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	p, err := LoadFrames(write("good.rgb", good), 4, 3, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.frames) != 2 || !bytes.Equal(p.frames[1], good[frame:]) || p.image(3).Pix[0] != good[frame] {
		t.Errorf("frames not read back as written: %d frames", len(p.frames))
	}
	tests := []struct {
		path    string
		max     int64
		wantErr string
	}{
		{write("empty.rgb", nil), 1 << 20, "empty"},
		{write("short.rgb", good[:frame+5]), 1 << 20, "not a whole number"},
		{write("big.rgb", good), int64(frame), "over --max-pool-mb"},
		{filepath.Join(dir, "missing.rgb"), 1 << 20, "no such file"},
		{dir, 1 << 20, "not a regular file"},
	}
	for _, tt := range tests {
		if _, err := LoadFrames(tt.path, 4, 3, tt.max); err == nil || !strings.Contains(err.Error(), tt.wantErr) {
			t.Errorf("LoadFrames(%s) error = %v, want one containing %q", filepath.Base(tt.path), err, tt.wantErr)
		}
	}
}
