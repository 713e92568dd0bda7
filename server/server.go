// Package server answers imgpipe's HTTP API (docs/serve.md) on an engine.Engine: single
// images processed on request, folder jobs run in the background, health, readiness and
// Prometheus metrics, behind a token, signed URLs and limits.
package server

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/imgpipe/imgpipe/engine"
)

// DefaultListen is where imgpipe serve listens unless told otherwise: this machine only.
const DefaultListen = "127.0.0.1:8080"

// Config says what a Server admits.
type Config struct {
	// Token, when set, is the bearer token every request but /healthz and /readyz must carry.
	Token string
	// SignKey, when set, makes process requests carry a signature of their chain (Sign).
	SignKey []byte
	// AllowRoots are the folders jobs may read and write under; none refuses folder jobs.
	AllowRoots []string
	// MaxBody bounds a request body's bytes; 0 means DefaultMaxBody.
	MaxBody int64
	// MaxRequests bounds the requests in progress; 0 means no bound of the server's own
	// (the engine's queue still bounds them).
	MaxRequests int
	// RequestTimeout bounds a process request's time; 0 means DefaultRequestTimeout.
	RequestTimeout time.Duration
	// Notice, if set, receives the server's one-line notices.
	Notice func(msg string)
}

// DefaultMaxBody is Config.MaxBody's default.
const DefaultMaxBody = 64 << 20

// DefaultRequestTimeout is Config.RequestTimeout's default.
const DefaultRequestTimeout = 30 * time.Second

// Server is an http.Handler for the API on one engine.
type Server struct {
	eng *engine.Engine
	cfg Config
}

// New returns a Server on e with c's settings.
func New(e *engine.Engine, c Config) (*Server, error) {
	return &Server{eng: e, cfg: c}, nil
}

// ServeHTTP answers one request.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	http.Error(w, "not yet", http.StatusNotImplemented)
}

// Shutdown stops admitting jobs and waits for those in progress, or for ctx.
func (s *Server) Shutdown(ctx context.Context) error { return errors.New("not yet") }

// Sign returns the signature of a process request for spec under key (docs/serve.md).
func Sign(key []byte, spec string) string { return "" }
