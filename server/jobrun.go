package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/imgpipe/imgpipe/pipeline"
	"github.com/imgpipe/imgpipe/pipeline/folderrun"
	"github.com/imgpipe/imgpipe/pipeline/job"
)

// defaultJobName names a submitted job file in its errors when the request names none.
const defaultJobName = "job.yaml"

// handleSubmit is POST /v1/jobs: the job file in the body is checked (its chain, its paths
// under the allowed roots) and started; it answers 202 with the job.
func (s *Server) handleSubmit(w http.ResponseWriter, r *http.Request) {
	if !s.admit() {
		writeError(w, http.StatusServiceUnavailable, errors.New("the server is shutting down"))
		return
	}
	defer s.inFlight.Done()
	req, err := s.jobRequest(w, r)
	if err != nil {
		answer(w, err)
		return
	}
	// The job outlives the request: its inputs (a bucket) are opened under its own context.
	ctx, cancel := context.WithCancel(context.Background())
	p, err := folderrun.Prepare(ctx, req)
	if err != nil {
		cancel()
		status := http.StatusInternalServerError
		if errors.As(err, new(*folderrun.RequestError)) {
			status = http.StatusBadRequest
		}
		writeError(w, status, err)
		return
	}
	j := newTask(cancel, req.ReportPath())
	id := s.jobs.add(j)
	accepted := j.snapshot() // queued: the answer does not race the run
	go s.runJob(ctx, j, id, p, req)
	w.Header().Set("Location", "/v1/jobs/"+id)
	writeJSON(w, http.StatusAccepted, accepted)
}

// jobRequest reads the job file in the body and makes its run's request, with every path
// confined to the allowed roots.
func (s *Server) jobRequest(w http.ResponseWriter, r *http.Request) (folderrun.Request, error) {
	var req folderrun.Request
	if len(s.roots) == 0 {
		return req, statusErr(http.StatusForbidden, errors.New("jobs need --allow-root: this server has no folder it may read or write"))
	}
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.MaxBody))
	if err != nil {
		return req, bodyError(err)
	}
	name := defaultJobName
	if n := r.URL.Query().Get("name"); n != "" {
		name = filepath.Base(n)
	}
	j, err := job.ParseWith(s.jobStages, name, data)
	if err == nil {
		err = j.Complete()
	}
	if err != nil {
		return req, statusErr(http.StatusBadRequest, err)
	}
	req = folderrun.Request{Plan: j.Plan, Exec: j.Exec, Pos: j.PosOf, Stdin: strings.NewReader(""), Stdout: io.Discard}
	paths := []struct {
		field string
		from  string
		to    *string
	}{
		{"input.dir", j.InputDir, &req.Input},
		{"output.dir", j.OutputDir, &req.Output},
		{"output.report", j.Report, &req.Report},
		{"execution.trace", j.Exec.Trace, &req.Exec.Trace},
	}
	for _, p := range paths {
		if p.from == "" {
			continue
		}
		if p.from == folderrun.StdinInput { // the same word for stdin and stdout
			return req, statusErr(http.StatusBadRequest, fmt.Errorf("%s: %s - is the server's own standard stream; name a file", j.PosOf(p.field), p.field))
		}
		if *p.to, err = s.confine(p.field, p.from); err != nil {
			return req, err
		}
	}
	return req, nil
}

// bodyError is the status of a body that could not be read: 413 past MaxBody.
func bodyError(err error) error {
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		return statusErr(http.StatusRequestEntityTooLarge, fmt.Errorf("the body is over --max-body (%d bytes)", tooLarge.Limit))
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return statusErr(http.StatusRequestTimeout, errors.New("the body did not arrive within --request-timeout"))
	}
	return statusErr(http.StatusBadRequest, err)
}

// runJob counts the job's inputs, runs it on the engine and records how it ended.
func (s *Server) runJob(ctx context.Context, j *task, id string, p *folderrun.Prepared, req folderrun.Request) {
	defer s.jobs.done()
	defer j.cancel() // frees the context
	total := p.Count()
	p.Close()
	j.mu.Lock()
	j.state.Progress.Total = total
	j.mu.Unlock()
	req.Notice = func(msg string) { s.notice("job %s: %s", id, msg) }
	req.Progress = j.progress
	req.Starting = func(src pipeline.Source) pipeline.Source {
		j.mu.Lock()
		j.state.State, j.started = StateRunning, true
		j.mu.Unlock()
		return src
	}
	sum, err := s.eng.Run(ctx, req)
	code := folderrun.ExitCode(sum, err)
	defer close(j.ended) // after the state below is recorded
	j.mu.Lock()
	defer j.mu.Unlock()
	j.state.ExitCode = code
	switch code {
	case folderrun.ExitOK, folderrun.ExitSomeFailed, folderrun.ExitNoInputs:
		j.state.State = StateDone
	case folderrun.ExitInterrupted:
		j.state.State = StateCancelled
	default:
		j.state.State = StateFailed
	}
	if err != nil {
		j.state.Error = err.Error()
	}
	if j.started {
		j.state.Summary = &sum
	}
}
