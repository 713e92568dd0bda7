package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/imgpipe/imgpipe/pipeline"
)

// Client calls a server's API.
type Client struct {
	// URL is the server's base URL, such as http://127.0.0.1:8080.
	URL string
	// Token is the bearer token, if the server wants one.
	Token string
	// SignKey, when set, signs process requests (Sign), for a server with --sign-key.
	SignKey []byte
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

// Finished reports whether the job has ended (done, failed or cancelled).
func (j Job) Finished() bool { return j.State != StateQueued && j.State != StateRunning }

// Progress counts a job's inputs; Total is -1 until known.
type Progress struct {
	Done    int `json:"done"`
	Total   int `json:"total"`
	OK      int `json:"ok"`
	Failed  int `json:"failed"`
	Skipped int `json:"skipped"`
}

// StatusError is a server's error answer: its status and its reason.
type StatusError struct {
	Status  int
	Message string
	// Errors are the mistakes one by one, when the server listed several (a job file's).
	Errors []string
	// RetryAfter is how long the server asked to wait (429, 503); 0 when it did not say.
	RetryAfter time.Duration
}

// Error is the status and the reason.
func (e *StatusError) Error() string {
	return fmt.Sprintf("server: %d %s: %s", e.Status, http.StatusText(e.Status), e.Message)
}

// Output is a processed image as the server answered it.
type Output struct {
	// Data are the output's bytes: the encoded image, or, for a chain without save, the
	// report line's JSON.
	Data []byte
	// ContentType is the answer's media type (image/png, application/json, ...).
	ContentType string
	// Report is the input's report line (the Imgpipe-Report header).
	Report pipeline.ReportLine
}

// Process runs spec on the image in body, signing the request when SignKey is set.
func (c *Client) Process(ctx context.Context, spec string, body io.Reader) (Output, error) {
	q := url.Values{"p": {spec}}
	if len(c.SignKey) > 0 {
		q.Set("sig", Sign(c.SignKey, spec))
	}
	resp, err := c.do(ctx, http.MethodPost, "/v1/process?"+q.Encode(), body)
	if err != nil {
		return Output{}, err
	}
	defer resp.Body.Close()
	out := Output{ContentType: resp.Header.Get("Content-Type")}
	if out.Data, err = io.ReadAll(resp.Body); err != nil {
		return Output{}, err
	}
	if err := json.Unmarshal([]byte(resp.Header.Get(ReportHeader)), &out.Report); err != nil {
		return out, fmt.Errorf("server: the answer's %s header: %w", ReportHeader, err)
	}
	return out, nil
}

// Submit starts a job from a job file's bytes (YAML or JSON).
func (c *Client) Submit(ctx context.Context, job []byte) (Job, error) {
	return c.SubmitFile(ctx, "", job)
}

// SubmitFile is Submit for a job file called name, which the server's errors then name.
func (c *Client) SubmitFile(ctx context.Context, name string, job []byte) (Job, error) {
	path := "/v1/jobs"
	if name != "" {
		path += "?" + url.Values{"name": {name}}.Encode()
	}
	var j Job
	return j, c.call(ctx, http.MethodPost, path, bytes.NewReader(job), &j)
}

// Job returns job id's state.
func (c *Client) Job(ctx context.Context, id string) (Job, error) {
	var j Job
	return j, c.call(ctx, http.MethodGet, "/v1/jobs/"+url.PathEscape(id), nil, &j)
}

// Jobs lists the jobs the server remembers, oldest first.
func (c *Client) Jobs(ctx context.Context) ([]Job, error) {
	var l JobList
	return l.Jobs, c.call(ctx, http.MethodGet, "/v1/jobs", nil, &l)
}

// Wait follows job id until it has finished, handing each state to progress (when set), and
// returns the last one; it returns early with ctx's error. Each query asks the server to
// answer when the job ends or after every, so the end is seen at once and progress at most
// once per every.
func (c *Client) Wait(ctx context.Context, id string, every time.Duration, progress func(Job)) (Job, error) {
	path := "/v1/jobs/" + url.PathEscape(id) + "?wait=" + url.QueryEscape(min(every, maxJobWait).String())
	for {
		start := time.Now()
		var j Job
		if err := c.call(ctx, http.MethodGet, path, nil, &j); err != nil {
			return j, err
		}
		if progress != nil {
			progress(j)
		}
		if j.Finished() {
			return j, nil
		}
		// A server that answers at once (one that does not wait) is asked again only
		// after every.
		t := time.NewTimer(every - time.Since(start))
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return j, ctx.Err()
		}
	}
}

// Cancel cancels job id.
func (c *Client) Cancel(ctx context.Context, id string) error {
	return c.call(ctx, http.MethodDelete, "/v1/jobs/"+url.PathEscape(id), nil, nil)
}

// Report copies job id's report to w.
func (c *Client) Report(ctx context.Context, id string, w io.Writer) error {
	resp, err := c.do(ctx, http.MethodGet, "/v1/jobs/"+url.PathEscape(id)+"/report", nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, err = io.Copy(w, resp.Body)
	return err
}

// call sends a request and decodes its JSON answer into v (nil: dropped).
func (c *Client) call(ctx context.Context, method, path string, body io.Reader, v any) error {
	resp, err := c.do(ctx, method, path, body)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if v == nil {
		_, err = io.Copy(io.Discard, resp.Body)
		return err
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		return fmt.Errorf("server: %s %s: %w", method, path, err)
	}
	return nil
}

// do sends a request with the token; an answer of 400 or more is a *StatusError.
func (c *Client) do(ctx context.Context, method, path string, body io.Reader) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimSuffix(c.URL, "/")+path, body)
	if err != nil {
		return nil, err
	}
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode < 400 {
		return resp, nil
	}
	defer resp.Body.Close()
	return nil, statusError(resp)
}

// statusError reads an error answer; one that is not docs/serve.md's JSON keeps its text.
func statusError(resp *http.Response) *StatusError {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	e := &StatusError{Status: resp.StatusCode}
	var body errorBody
	if json.Unmarshal(b, &body) == nil && body.Error != "" {
		e.Message, e.Errors = body.Error, body.Errors
	} else {
		e.Message = strings.TrimSpace(string(b))
	}
	if secs, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil {
		e.RetryAfter = time.Duration(secs) * time.Second
	}
	return e
}
