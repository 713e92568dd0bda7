package pipeline

import (
	"bytes"
	"context"
	"runtime"
	"strings"
	"testing"

	"github.com/imgpipe/imgpipe/stages/npy"
)

// npyClaiming is a .npy file whose header claims shape but which holds only data.
func npyClaiming(t *testing.T, shape []int, data int) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := npy.WriteHeader(&b, npy.Header{Descr: "<f4", Shape: shape}); err != nil {
		t.Fatal(err)
	}
	b.Write(make([]byte, data))
	return b.Bytes()
}

// An array's header is held to its file as an image's is: one that claims more data than
// the file holds, or a file far larger than its data, is refused before anything is
// allocated for it, through every kind of input (bytes, a bucket object, a file).
func TestArrayHeaderAgainstFile(t *testing.T) {
	big := npyClaiming(t, []int{1 << 14, 1 << 14}, 64) // claims 1 GiB, holds 64 bytes
	padded := npyClaiming(t, []int{2}, 8+(17<<20))     // 8 bytes of data, 17 MiB of padding
	tests := []struct {
		name string
		data []byte
		want string
	}{
		{"claims more than it holds", big, "refused before reading"},
		{"far larger than its data", padded, "refused unread"},
	}
	plan := mustArrayPlan(t, "load max_elements=300000000 | sum")
	for _, tt := range tests {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		sink := Collect()
		_, err := Run(context.Background(), plan, Inputs(Input{Name: "a.npy", Data: tt.data}), sink, Options{Workers: 1})
		runtime.ReadMemStats(&after)
		if err != nil {
			t.Fatal(err)
		}
		if r := sink.Results[0]; r.Status != StatusFailed || !strings.Contains(r.Err.Error(), tt.want) {
			t.Errorf("%s: %s %v, want %q", tt.name, r.Status, r.Err, tt.want)
		}
		if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 64<<20+uint64(len(tt.data)) {
			t.Errorf("%s: %d MB allocated", tt.name, alloc>>20)
		}
	}
}

// A list on stdin that never ends (newlines forever, or one endless line) is an error,
// read in bounded memory, not a hang.
func TestReadFileListEndless(t *testing.T) {
	for name, r := range map[string]interface{ Read([]byte) (int, error) }{
		"newlines": repeat('\n'), "one line": repeat('a'),
	} {
		_, err := ReadFileList(r)
		if err == nil || !strings.Contains(err.Error(), "file list:") {
			t.Errorf("%s: %v", name, err)
		}
	}
}

type repeat byte

func (c repeat) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(c)
	}
	return len(p), nil
}
