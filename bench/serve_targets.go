package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/imgpipe/imgpipe/engine"
	"github.com/imgpipe/imgpipe/pipeline"
	"github.com/imgpipe/imgpipe/pipeline/folderrun"
)

// engineTarget sends each request to an Engine in this process, as a server built on it
// would.
type engineTarget struct {
	e    *engine.Engine
	plan *pipeline.Plan
}

func (t engineTarget) do(ctx context.Context, p *photo) outcome {
	res, err := t.e.Process(ctx, t.plan, pipeline.Input{Name: p.name, Data: p.data})
	switch {
	case errors.Is(err, engine.ErrBusy):
		return outcome{code: "busy", err: err}
	case err != nil:
		return outcome{code: "error", err: err}
	case res.Status != pipeline.StatusOK:
		return outcome{code: string(res.Status), err: res.Err}
	}
	return outcome{code: "ok", ok: true}
}

// httpTarget sends each request over HTTP with keep-alive connections: a POST of the photo
// to an imgpipe serve (docs/serve.md), or a GET of a URL made from the photo's name (a
// peer such as imgproxy, which reads the photo itself).
type httpTarget struct {
	client *http.Client
	post   string // the process URL, for POST; "" for GET
	get    string // the GET template, with {name}
	token  string // a bearer token, when set
}

// newHTTPTarget makes a target whose pool keeps a connection per client (and some for an
// open loop's extra requests in flight) open between requests.
func newHTTPTarget(c *ServeConfig) *httpTarget {
	tr := &http.Transport{MaxIdleConns: c.Clients + 64, MaxIdleConnsPerHost: c.Clients + 64,
		IdleConnTimeout: 90 * time.Second, DisableCompression: true}
	t := &httpTarget{client: &http.Client{Transport: tr}, get: c.Get, token: c.Token}
	if c.URL != "" {
		t.post = strings.TrimSuffix(c.URL, "/") + "/v1/process?p=" + url.QueryEscape(c.Spec)
	}
	return t
}

// getURL is the template with {name} replaced by p's name, each path segment escaped.
func getURL(template, name string) string {
	seg := strings.Split(name, "/")
	for i, s := range seg {
		seg[i] = url.PathEscape(s)
	}
	return strings.ReplaceAll(template, "{name}", strings.Join(seg, "/"))
}

func (t *httpTarget) do(ctx context.Context, p *photo) outcome {
	var req *http.Request
	var err error
	if t.post != "" {
		req, err = http.NewRequestWithContext(ctx, http.MethodPost, t.post, bytes.NewReader(p.data))
		if err == nil {
			req.Header.Set("Content-Type", "application/octet-stream")
		}
	} else {
		req, err = http.NewRequestWithContext(ctx, http.MethodGet, getURL(t.get, p.name), nil)
	}
	if err != nil {
		return outcome{code: "request", err: err}
	}
	if t.token != "" {
		req.Header.Set("Authorization", "Bearer "+t.token)
	}
	resp, err := t.client.Do(req)
	if err != nil {
		return outcome{code: "transport", err: err}
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20)) // all of it, to keep the connection
	if err != nil {
		return outcome{code: "transport", err: err}
	}
	if resp.StatusCode != http.StatusOK {
		return outcome{code: strconv.Itoa(resp.StatusCode), err: errors.New(firstLine(body))}
	}
	if len(body) == 0 {
		return outcome{code: "empty", err: errors.New("200 with an empty body")}
	}
	return outcome{code: "200", ok: true}
}

// firstLine is the start of an error body, for the report.
func firstLine(b []byte) string {
	s, _, _ := strings.Cut(string(b), "\n")
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}

// FolderRate is the same chain run once as a folder job over the load's photos.
type FolderRate struct {
	Files   int     `json:"files"`
	OK      int     `json:"ok"`
	Seconds float64 `json:"seconds"`
	ImgPerS float64 `json:"img_per_s"`
	// ServeRatio is the saturated load's req/s over ImgPerS.
	ServeRatio float64 `json:"serve_ratio"`
}

// tmpRoot is where the folder run's input links and outputs go: memory, when there is
// some, so that the disk is not what is measured.
func tmpRoot() string {
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		return "/dev/shm"
	}
	return ""
}

// folderRate runs plan over n files (the photos repeated under new names, as links) into
// a temporary folder on e, as 'imgpipe run' would on a warm engine, and times it from the
// first input taken to the end.
func folderRate(ctx context.Context, e *engine.Engine, plan *pipeline.Plan, exec pipeline.Execution, dir string, photos []photo, n int) (FolderRate, error) {
	work, err := os.MkdirTemp(tmpRoot(), "imgpipe-bench-serve-")
	if err != nil {
		return FolderRate{}, err
	}
	defer os.RemoveAll(work)
	in, out := filepath.Join(work, "in"), filepath.Join(work, "out")
	if err := os.Mkdir(in, 0o755); err != nil {
		return FolderRate{}, err
	}
	for i := range n {
		p := photos[i%len(photos)]
		dst := filepath.Join(in, fmt.Sprintf("%d-%s", i, filepath.Base(p.name)))
		if os.Link(filepath.Join(dir, filepath.FromSlash(p.name)), dst) != nil {
			if err := os.WriteFile(dst, p.data, 0o644); err != nil {
				return FolderRate{}, err
			}
		}
	}
	var start time.Time
	req := folderrun.Request{Plan: plan, Input: in, Output: out, Exec: exec,
		Starting: func(src pipeline.Source) pipeline.Source { start = time.Now(); return src }}
	sum, err := e.Run(ctx, req)
	if err != nil {
		return FolderRate{}, fmt.Errorf("folder run: %w", err)
	}
	wall := time.Since(start)
	return FolderRate{Files: n, OK: sum.OK, Seconds: round3(wall.Seconds()), ImgPerS: round3(float64(sum.OK) / wall.Seconds())}, nil
}
