// Package server answers imgpipe's HTTP API (docs/serve.md) on an engine.Engine: single
// images processed on request, folder jobs run in the background, health, readiness and
// Prometheus metrics, behind a token, signed URLs and limits.
package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"sync"
	"time"

	"github.com/imgpipe/imgpipe/engine"
	"github.com/imgpipe/imgpipe/pipeline"
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
	// AllowBuckets lets jobs read and write bucket URLs (s3://, gs://, azblob://) with the
	// server's own credentials; a file:// URL must lie under AllowRoots all the same.
	AllowBuckets bool
	// AllowKernels lets process requests and jobs run the kernel stage, which runs CUDA code
	// of the request's choosing on the server's GPU; a kernel file (src=) must lie under
	// AllowRoots, and a process request may not name one.
	AllowKernels bool
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
	eng   *engine.Engine
	cfg   Config
	roots []string // AllowRoots, absolute with their links resolved
	mux   *http.ServeMux
	slots chan struct{} // one per request in progress, when MaxRequests bounds them
	plans planCache
	// jobStages are the builtin stages, with the kernel stage's binding checking its file
	// against the roots first (a job's chain is bound as its file is read).
	jobStages *pipeline.Registry
	jobs      *registry
	metrics   *metricSet

	mu       sync.Mutex
	draining bool
	inFlight sync.WaitGroup // process requests and job submissions in progress
}

// New returns a Server on e with c's settings; an AllowRoots folder that does not exist is
// an error.
func New(e *engine.Engine, c Config) (*Server, error) {
	if e == nil {
		return nil, errors.New("server: no engine")
	}
	if c.MaxBody < 0 || c.MaxRequests < 0 || c.RequestTimeout < 0 {
		return nil, fmt.Errorf("server: negative limit (max body %d, max requests %d, request timeout %v)", c.MaxBody, c.MaxRequests, c.RequestTimeout)
	}
	if c.MaxBody == 0 {
		c.MaxBody = DefaultMaxBody
	}
	if c.RequestTimeout == 0 {
		c.RequestTimeout = DefaultRequestTimeout
	}
	s := &Server{eng: e, cfg: c, mux: http.NewServeMux(), jobs: newRegistry()}
	for _, r := range c.AllowRoots {
		root, err := resolveRoot(r)
		if err != nil {
			return nil, err
		}
		s.roots = append(s.roots, root)
	}
	if c.MaxRequests > 0 {
		s.slots = make(chan struct{}, c.MaxRequests)
	}
	var err error
	if s.jobStages, err = s.jobRegistry(); err != nil {
		return nil, err
	}
	s.metrics = newMetricSet(s)
	s.routes()
	return s, nil
}

// resolveRoot is an allowed root as paths are compared with it: absolute, links resolved.
func resolveRoot(r string) (string, error) {
	abs, err := filepath.Abs(r)
	if err == nil {
		abs, err = filepath.EvalSymlinks(abs)
	}
	if err != nil {
		return "", fmt.Errorf("server: allowed root: %w", err)
	}
	return abs, nil
}

// The routes that need no token: a load balancer's probes.
const (
	routeHealth = "GET /healthz"
	routeReady  = "GET /readyz"
)

// routes registers every route of docs/serve.md.
func (s *Server) routes() {
	s.mux.HandleFunc("POST /v1/process", s.handleProcess)
	s.mux.HandleFunc("POST /v1/jobs", s.handleSubmit)
	s.mux.HandleFunc("GET /v1/jobs", s.handleJobs)
	s.mux.HandleFunc("GET /v1/jobs/{id}", s.handleJob)
	s.mux.HandleFunc("GET /v1/jobs/{id}/report", s.handleReport)
	s.mux.HandleFunc("DELETE /v1/jobs/{id}", s.handleCancel)
	s.mux.HandleFunc(routeHealth, s.handleHealth)
	s.mux.HandleFunc(routeReady, s.handleReady)
	s.mux.HandleFunc("GET /metrics", s.handleMetrics)
}

// ServeHTTP answers one request: the token first (but for health and readiness), then its
// route, with the mux's own 404 and 405 answered as JSON errors.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	h, pattern := s.mux.Handler(r)
	rec := &recorder{ResponseWriter: w, status: http.StatusOK}
	defer func() { s.metrics.request(pattern, rec.status, time.Since(start)) }()
	if pattern != routeHealth && pattern != routeReady && !s.authorized(rec, r) {
		return
	}
	if pattern == "" { // the mux's 404 or 405 (it sets Allow): its status, our body
		probe := &statusOnly{header: rec.Header()}
		h.ServeHTTP(probe, r)
		if probe.status == http.StatusNotFound || probe.status == http.StatusMethodNotAllowed {
			writeError(rec, probe.status, fmt.Errorf("%s %s: %s", r.Method, r.URL.Path, reasons[probe.status]))
			return
		}
	}
	s.mux.ServeHTTP(rec, r)
}

var reasons = map[int]string{
	http.StatusNotFound:         "no such route (see docs/serve.md)",
	http.StatusMethodNotAllowed: "the route does not take this method (Allow says which it takes)",
}

// admit counts a request that starts work (a process request, a job submission) unless
// the server is draining.
func (s *Server) admit() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.draining {
		return false
	}
	s.inFlight.Add(1)
	return true
}

// ready reports whether the server admits work: not draining, the engine open.
func (s *Server) ready() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return !s.draining && !s.eng.Closed()
}

// Shutdown stops admitting work (process requests and jobs are answered 503, /readyz
// too) and waits for the process requests and jobs in progress; when ctx ends first, it
// cancels the jobs (each stops after its current inputs, its report complete, as Ctrl-C
// stops a local run), waits for them and returns ctx's error. The engine stays open: its
// owner closes it.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.draining = true
	s.mu.Unlock()
	done := make(chan struct{})
	go func() {
		s.inFlight.Wait()
		s.jobs.wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		s.jobs.cancelAll()
		<-done
		return ctx.Err()
	}
}

func (s *Server) notice(format string, args ...any) {
	if s.cfg.Notice != nil {
		s.cfg.Notice(fmt.Sprintf(format, args...))
	}
}
