package server

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/imgpipe/imgpipe/cudastage/sched"
	"github.com/imgpipe/imgpipe/cudastage/sched/schedtest"
	"github.com/imgpipe/imgpipe/engine"
	"github.com/imgpipe/imgpipe/pipeline"
)

// TestDeviceFault: a device that fails for good answers the request in flight 500 and
// every later one too, /readyz turns 503 naming the fault, and the server keeps answering
// (health and metrics) for its operator to see and restart it.
func TestDeviceFault(t *testing.T) {
	exec := pipeline.DefaultExecution()
	exec.Device, exec.GPU, exec.Batch, exec.Workers, exec.PinnedMB = "cuda", "0", 4, 2, 4
	cfg := engine.Config{Exec: exec}
	cfg.GPUs.Open = func(int) (sched.Device, func() error, error) {
		fake := schedtest.NewFake(schedtest.FakeConfig{Fault: func(call string) error {
			if strings.HasPrefix(call, "Run ") {
				return errors.New("illegal address (injected)")
			}
			return nil
		}})
		return fake, func() error { fake.Close(); return nil }, nil
	}
	e, err := engine.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	s, err := New(e, Config{})
	if err != nil {
		t.Fatal(err)
	}
	if w := call(s, http.MethodGet, "/readyz", nil); w.Code != 200 {
		t.Fatalf("readyz before the fault: %d", w.Code)
	}
	img := pngImage(t)
	for i := range 2 {
		if w := call(s, http.MethodPost, processURL("decode | grayscale | save format=png"), img); w.Code != 500 || !strings.Contains(errorOf(t, w).Error, "injected") {
			t.Fatalf("request %d: %d %s, want 500 naming the fault", i, w.Code, w.Body)
		}
	}
	for _, tc := range []struct {
		target string
		code   int
		want   string
	}{
		{"/readyz", 503, "the device failed"},
		{"/healthz", 200, "ok"},
		{"/metrics", 200, "imgpipe_"},
	} {
		if w := call(s, http.MethodGet, tc.target, nil); w.Code != tc.code || !strings.Contains(w.Body.String(), tc.want) {
			t.Errorf("%s after the fault: %d %q, want %d with %q", tc.target, w.Code, w.Body, tc.code, tc.want)
		}
	}
}
