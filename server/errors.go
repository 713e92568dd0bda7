package server

import (
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/imgpipe/imgpipe/pipeline"
)

// retryAfter is the Retry-After, in seconds, of a 429: a full queue drains within a few
// device batches, so a second is a polite retry.
const retryAfter = 1

// errorBody is every error's JSON (docs/serve.md#errors); Errors lists a job file's or a
// chain's mistakes one by one when there are several, Error joining them.
type errorBody struct {
	Error  string   `json:"error"`
	Status int      `json:"status"`
	Errors []string `json:"errors,omitempty"`
}

// apiError is an error with the status it is answered with.
type apiError struct {
	status int
	err    error
}

func (e *apiError) Error() string { return e.err.Error() }

func (e *apiError) Unwrap() error { return e.err }

// statusErr wraps err with the status it is answered with.
func statusErr(status int, err error) *apiError { return &apiError{status: status, err: err} }

// writeError answers err as docs/serve.md's JSON error with status; a 429 carries
// Retry-After, a 401 WWW-Authenticate.
func writeError(w http.ResponseWriter, status int, err error) {
	body := errorBody{Error: err.Error(), Status: status}
	if list := pipeline.Errors(err); len(list) > 1 {
		for _, e := range list {
			body.Errors = append(body.Errors, e.Error())
		}
	}
	h := w.Header()
	switch status {
	case http.StatusTooManyRequests, http.StatusServiceUnavailable:
		h.Set("Retry-After", strconv.Itoa(retryAfter))
	case http.StatusUnauthorized:
		h.Set("WWW-Authenticate", `Bearer realm="imgpipe"`)
	}
	writeJSON(w, status, body)
}

// writeJSON answers v as JSON with status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil { // only our own types are written: cannot happen
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}

// recorder keeps the status a handler answered, for the metrics.
type recorder struct {
	http.ResponseWriter
	status int
	wrote  bool
}

func (r *recorder) WriteHeader(code int) {
	if !r.wrote {
		r.status, r.wrote = code, true
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(b []byte) (int, error) {
	r.wrote = true
	return r.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection (to flush a report).
func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// statusOnly takes the mux's own 404 and 405 answers, keeping their status and headers
// (Allow) and dropping their text.
type statusOnly struct {
	header http.Header
	status int
}

func (s *statusOnly) Header() http.Header         { return s.header }
func (s *statusOnly) WriteHeader(code int)        { s.status = code }
func (s *statusOnly) Write(b []byte) (int, error) { return len(b), nil }
