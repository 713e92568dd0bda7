package flow

import (
	"bytes"
	"runtime"
	"testing"
	"time"

	"github.com/imgpipe/imgpipe/stages"
)

// encode returns m encoded in format ("png" or "jpeg").
func encode(t testing.TB, m *stages.Image, format string) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := stages.Encode(&b, m, stages.SaveOptions{Format: format}); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// checkNoLeaks waits for the goroutine count to come back to base, and fails with the
// remaining stacks if it does not.
func checkNoLeaks(t *testing.T, base int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > base {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			n := runtime.Stack(buf, true)
			t.Fatalf("%d goroutines left, want %d:\n%s", runtime.NumGoroutine(), base, buf[:n])
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// same reports whether a and b have the same shape and pixels.
func same(a, b *stages.Image) bool {
	if a.W != b.W || a.H != b.H || a.C != b.C {
		return false
	}
	for y := 0; y < a.H; y++ {
		if !bytes.Equal(a.Row(y), b.Row(y)) {
			return false
		}
	}
	return true
}
