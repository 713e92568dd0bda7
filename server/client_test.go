package server

import (
	"bytes"
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/imgpipe/imgpipe/pipeline"
	"github.com/imgpipe/imgpipe/pipeline/folderrun"
)

// listen serves s on a real socket of this machine, shut down when the test ends.
func listen(t *testing.T, s *Server) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: s}
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	t.Cleanup(func() {
		if err := hs.Shutdown(context.Background()); err != nil {
			t.Error(err)
		}
		if err := <-served; !errors.Is(err, http.ErrServerClosed) {
			t.Error(err)
		}
		if err := s.Shutdown(context.Background()); err != nil {
			t.Error(err)
		}
	})
	return "http://" + ln.Addr().String()
}

// TestClient: the Go client over a real connection: process, a job's whole life, and the
// server's errors as *StatusError.
func TestClient(t *testing.T) {
	root := t.TempDir()
	in, out := filepath.Join(root, "in"), filepath.Join(root, "out")
	writeImages(t, in, 3)
	key := []byte("k")
	s := newServer(t, Config{Token: "tok", SignKey: key, AllowRoots: []string{root}})
	c := &Client{URL: listen(t, s) + "/", Token: "tok", SignKey: key}
	ctx := context.Background()
	img := pngImage(t)

	o, err := c.Process(ctx, thumb, bytes.NewReader(img))
	if err != nil || !bytes.Equal(o.Data, folderOutput(t, thumb, img)) || o.ContentType != "image/png" || o.Report.Status != pipeline.StatusOK || o.Report.Width != 40 {
		t.Fatalf("Process: %v, %d bytes %q %+v", err, len(o.Data), o.ContentType, o.Report)
	}
	j, err := c.SubmitFile(ctx, "thumbs.yaml", jobFile(in, out))
	if err != nil || j.State != StateQueued {
		t.Fatalf("Submit: %v %+v", err, j)
	}
	s.jobs.wait()
	seen := 0
	if j, err = c.Wait(ctx, j.ID, time.Hour, func(Job) { seen++ }); err != nil || !j.Finished() || j.ExitCode != 0 || j.Progress.OK != 3 || seen != 1 {
		t.Fatalf("Wait: %v %+v, %d states seen", err, j, seen)
	}
	never := newTask(func() {}, "")
	queued := s.jobs.add(never) // never runs
	gone, leave := context.WithCancel(ctx)
	leave()
	if _, err := c.Wait(gone, queued, time.Hour, nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait with its context ended: %v", err)
	}
	// A waiting query answers as the job ends, not an hour later.
	ended := make(chan Job)
	go func() {
		j, _ := c.Wait(ctx, queued, time.Hour, nil)
		ended <- j
	}()
	never.mu.Lock()
	never.state.State = StateCancelled
	never.mu.Unlock()
	close(never.ended)
	if j := <-ended; j.State != StateCancelled {
		t.Fatalf("Wait as the job ended: %+v", j)
	}
	s.jobs.done()
	var report bytes.Buffer
	if err := c.Report(ctx, j.ID, &report); err != nil || !bytes.Equal(report.Bytes(), readAll(t, filepath.Join(out, folderrun.ReportName))) {
		t.Fatalf("Report: %v %q", err, report.String())
	}
	if jobs, err := c.Jobs(ctx); err != nil || len(jobs) != 2 || jobs[0].ID != j.ID {
		t.Fatalf("Jobs: %v %+v", err, jobs)
	}
	if err := c.Cancel(ctx, j.ID); err != nil {
		t.Fatalf("Cancel of a finished job: %v", err)
	}

	for _, tc := range []struct {
		name   string
		call   func(c *Client) error
		status int
		want   string
	}{
		{"no such job", func(c *Client) error { _, err := c.Job(ctx, "nope"); return err }, 404, "no job nope"},
		{"bad wait", func(c *Client) error {
			return c.call(ctx, http.MethodGet, "/v1/jobs/"+j.ID+"?wait=forever", nil, nil)
		}, 400, "wait=forever"},
		{"bad chain", func(c *Client) error { _, err := c.Process(ctx, "decode | blurr", bytes.NewReader(img)); return err }, 400, "did you mean"},
		{"bad job", func(c *Client) error { _, err := c.SubmitFile(ctx, "j.yaml", []byte("input: 3")); return err }, 400, "j.yaml:1:"},
		{"no token", func(c *Client) error { c.Token = ""; return c.Cancel(ctx, j.ID) }, 401, "token"},
		{"unsigned", func(c *Client) error {
			c.SignKey = nil
			_, err := c.Process(ctx, thumb, bytes.NewReader(img))
			return err
		}, 403, "signed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cc := *c
			var se *StatusError
			if err := tc.call(&cc); !errors.As(err, &se) || se.Status != tc.status || !strings.Contains(se.Message, tc.want) {
				t.Fatalf("%v, want a %d naming %q", err, tc.status, tc.want)
			}
		})
	}
}

// TestCurl: a client that is not ours (curl, where installed) gets the same bytes.
func TestCurl(t *testing.T) {
	curl, err := exec.LookPath("curl")
	if err != nil {
		t.Skip("no curl")
	}
	s := newServer(t, Config{Token: "tok"})
	base := listen(t, s)
	dir := t.TempDir()
	img := pngImage(t)
	body, got := filepath.Join(dir, "in.png"), filepath.Join(dir, "out.png")
	if err := os.WriteFile(body, img, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(curl, "-sS", "-o", got, "-w", "%{http_code} %{content_type}", "-H", "Authorization: Bearer tok",
		"--data-binary", "@"+body, base+processURL(thumb))
	status, err := cmd.Output()
	if err != nil || string(status) != "200 image/png" {
		t.Fatalf("curl: %v %q", err, status)
	}
	if !bytes.Equal(readAll(t, got), folderOutput(t, thumb, img)) {
		t.Fatal("curl's output differs from the folder run's")
	}
	cmd = exec.Command(curl, "-sS", "-w", "\n%{http_code}", base+"/metrics")
	if b, err := cmd.Output(); err != nil || !bytes.HasSuffix(b, []byte("\n401")) {
		t.Fatalf("curl /metrics without the token: %v %q", err, b)
	}
}
