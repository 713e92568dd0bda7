package server

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/imgpipe/imgpipe/engine"
	"github.com/imgpipe/imgpipe/pipeline"
	"github.com/imgpipe/imgpipe/stages/stagestest"
)

// cpuExec are the settings of a CPU engine.
func cpuExec() pipeline.Execution {
	exec := pipeline.DefaultExecution()
	exec.Device = "cpu"
	return exec
}

// newEngine opens a CPU engine with cfg's other settings, closed when the test ends.
func newEngine(t *testing.T, cfg engine.Config) *engine.Engine {
	t.Helper()
	cfg.Exec = cpuExec()
	e, err := engine.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

// newServer is a server on a fresh CPU engine.
func newServer(t *testing.T, c Config) *Server {
	t.Helper()
	s, err := New(newEngine(t, engine.Config{}), c)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// png is a small PNG photo stand-in.
func pngImage(t *testing.T) []byte { return stagestest.Encode(t, stagestest.Smooth(40, 30, 1), "png") }

// call sends one request to h and returns the answer.
func call(h http.Handler, method, target string, body []byte, header ...string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(method, target, bytes.NewReader(body))
	for i := 0; i+1 < len(header); i += 2 {
		r.Header.Set(header[i], header[i+1])
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// errorOf decodes an error answer, failing t when it is not docs/serve.md's JSON with its
// own status.
func errorOf(t *testing.T, w *httptest.ResponseRecorder) errorBody {
	t.Helper()
	var e errorBody
	if err := json.Unmarshal(w.Body.Bytes(), &e); err != nil || e.Status != w.Code || e.Error == "" {
		t.Fatalf("answer %d %q: not a JSON error with its status (%v)", w.Code, w.Body, err)
	}
	if ct := w.Header().Get("Content-Type"); ct != "application/json" {
		t.Errorf("error Content-Type %q", ct)
	}
	return e
}

// writeImages writes n PNGs into dir.
func writeImages(t *testing.T, dir string, n int) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		data := stagestest.Encode(t, stagestest.Smooth(24+i, 16+i, int64(i)), "png")
		if err := os.WriteFile(filepath.Join(dir, string(rune('a'+i))+".png"), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// readAll reads a file, failing t.
func readAll(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
