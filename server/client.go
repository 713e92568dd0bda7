package server

import (
	"context"
	"errors"
	"io"
	"net/http"

	"github.com/imgpipe/imgpipe/pipeline"
)

// Client calls a server's API.
type Client struct {
	// URL is the server's base URL, such as http://127.0.0.1:8080.
	URL string
	// Token is the bearer token, if the server wants one.
	Token string
	// HTTP is the client used; nil means http.DefaultClient.
	HTTP *http.Client
}

// Job is a job's state as GET /v1/jobs/{id} gives it.
type Job struct {
	ID       string            `json:"id"`
	State    string            `json:"state"`
	Progress Progress          `json:"progress"`
	Summary  *pipeline.Summary `json:"summary,omitempty"`
	Error    string            `json:"error,omitempty"`
	ExitCode int               `json:"exit_code"`
}

// Progress counts a job's inputs; Total is -1 until known.
type Progress struct {
	Done    int `json:"done"`
	Total   int `json:"total"`
	OK      int `json:"ok"`
	Failed  int `json:"failed"`
	Skipped int `json:"skipped"`
}

// Submit starts a job from a job file's bytes (YAML or JSON).
func (c *Client) Submit(ctx context.Context, job []byte) (Job, error) {
	return Job{}, errors.New("not yet")
}

// Job returns job id's state.
func (c *Client) Job(ctx context.Context, id string) (Job, error) {
	return Job{}, errors.New("not yet")
}

// Cancel cancels job id.
func (c *Client) Cancel(ctx context.Context, id string) error { return errors.New("not yet") }

// Report copies job id's report to w.
func (c *Client) Report(ctx context.Context, id string, w io.Writer) error {
	return errors.New("not yet")
}
