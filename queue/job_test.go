package queue

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/imgpipe/imgpipe/blobio"
	"github.com/imgpipe/imgpipe/pipeline"
)

// ListTasks gives each input its size and time from the store, and an input that cannot be
// read or stat'ed its error, in input order.
func TestListTasks(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "a.png"), []byte("12345"), 0o644); err != nil {
		t.Fatal(err)
	}
	store, err := blobio.OpenStore(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	src := pipeline.Inputs(
		pipeline.Input{Name: "a.png"},
		pipeline.Input{Name: "gone.png"},
		pipeline.Input{Name: "bad.png", Err: errors.New("unreadable")},
	)
	tasks, err := ListTasks(context.Background(), src, store)
	if err != nil {
		t.Fatal(err)
	}
	if len(tasks) != 3 {
		t.Fatalf("%d tasks, want 3", len(tasks))
	}
	tests := []struct {
		name, err string
		size      int64
	}{
		{"a.png", "", 5},
		{"gone.png", "stat: ", 0},
		{"bad.png", "unreadable", 0},
	}
	for i, tt := range tests {
		got := tasks[i]
		if got.Index != i || got.Name != tt.name || got.Size != tt.size || !strings.HasPrefix(got.Err, tt.err) || (tt.err == "") != (got.Err == "") {
			t.Errorf("task %d = %+v, want %s of %d bytes, error %q", i, got, tt.name, tt.size, tt.err)
		}
	}
	if tasks[0].ModTime.IsZero() {
		t.Error("a.png has no time")
	}
}
