package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/imgpipe/imgpipe/blobio"
	"github.com/imgpipe/imgpipe/pipeline"
	"github.com/imgpipe/imgpipe/pipeline/folderrun"
)

// A job's states (Job.State).
const (
	StateQueued    = "queued"    // submitted, its first input not yet taken
	StateRunning   = "running"   // taking inputs
	StateDone      = "done"      // every input covered: exit code 0, or 1 when some failed
	StateFailed    = "failed"    // a bad request (exit 2) or a run error (exit 3)
	StateCancelled = "cancelled" // cancelled (exit 130), its report covering what was done
)

// maxFinishedJobs bounds the finished jobs a server remembers; the oldest go first.
const maxFinishedJobs = 1000

// task is one submitted job: its state as the API shows it, and how to stop it.
type task struct {
	cancel context.CancelFunc
	report string        // the report's path, or its bucket URL
	ended  chan struct{} // closed once the job has finished

	mu      sync.Mutex
	state   Job
	started bool // its report (journal) exists: the run took its first input
}

func newTask(cancel context.CancelFunc, report string) *task {
	return &task{cancel: cancel, report: report, ended: make(chan struct{})}
}

// snapshot is the job's state now.
func (j *task) snapshot() Job {
	j.mu.Lock()
	defer j.mu.Unlock()
	s := j.state
	if s.Summary != nil {
		sum := *s.Summary
		s.Summary = &sum
	}
	return s
}

func (j *task) finished() bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.state.State != StateQueued && j.state.State != StateRunning
}

// progress counts one result.
func (j *task) progress(r *pipeline.Result) {
	j.mu.Lock()
	defer j.mu.Unlock()
	p := &j.state.Progress
	p.Done++
	switch r.Status {
	case pipeline.StatusOK:
		p.OK++
	case pipeline.StatusFailed:
		p.Failed++
	case pipeline.StatusSkipped:
		p.Skipped++
	}
}

// registry holds the jobs, in submission order, running ones and the last finished ones.
type registry struct {
	mu      sync.Mutex
	byID    map[string]*task
	order   []string
	running sync.WaitGroup
}

func newRegistry() *registry { return &registry{byID: map[string]*task{}} }

// add registers a new job under a fresh id, counting it as running until done is called.
func (g *registry) add(j *task) string {
	var b [8]byte
	rand.Read(b[:]) // never fails (crypto/rand)
	id := hex.EncodeToString(b[:])
	j.state = Job{ID: id, State: StateQueued, Progress: Progress{Total: -1}}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.byID[id] = j
	g.order = append(g.order, id)
	g.running.Add(1)
	return id
}

// done records a job's end, forgetting the oldest finished job past maxFinishedJobs.
func (g *registry) done() {
	defer g.running.Done()
	g.mu.Lock()
	defer g.mu.Unlock()
	finished := 0
	for _, id := range g.order {
		if g.byID[id].finished() {
			finished++
		}
	}
	for i := 0; finished > maxFinishedJobs && i < len(g.order); {
		if id := g.order[i]; g.byID[id].finished() {
			delete(g.byID, id)
			g.order = append(g.order[:i], g.order[i+1:]...)
			finished--
			continue
		}
		i++
	}
}

func (g *registry) get(id string) *task {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.byID[id]
}

func (g *registry) list() []Job {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make([]Job, 0, len(g.order))
	for _, id := range g.order {
		out = append(out, g.byID[id].snapshot())
	}
	return out
}

func (g *registry) wait() { g.running.Wait() }

func (g *registry) cancelAll() {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, j := range g.byID {
		j.cancel()
	}
}

// JobList is GET /v1/jobs's answer: the jobs the server remembers, oldest first.
type JobList struct {
	Jobs []Job `json:"jobs"`
}

func (s *Server) handleJobs(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, JobList{Jobs: s.jobs.list()})
}

// lookup is the job of the request's {id}, or a 404.
func (s *Server) lookup(w http.ResponseWriter, r *http.Request) *task {
	j := s.jobs.get(r.PathValue("id"))
	if j == nil {
		writeError(w, http.StatusNotFound, fmt.Errorf("no job %s (the server keeps the last %d finished jobs until it stops)",
			r.PathValue("id"), maxFinishedJobs))
	}
	return j
}

// maxJobWait bounds a job query's wait, so that a forgotten client holds no connection long.
const maxJobWait = 30 * time.Second

// handleJob answers a job's state; with wait=DURATION (at most maxJobWait) it answers when the
// job finishes or that much later, whichever comes first, so that a client following a job
// learns of its end at once instead of at its next poll.
func (s *Server) handleJob(w http.ResponseWriter, r *http.Request) {
	var wait time.Duration
	if v := r.URL.Query().Get("wait"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 || d > maxJobWait {
			writeError(w, http.StatusBadRequest, fmt.Errorf("wait=%s: want a duration from 0 to %v", v, maxJobWait))
			return
		}
		wait = d
	}
	j := s.lookup(w, r)
	if j == nil {
		return
	}
	if wait > 0 && !j.finished() {
		t := time.NewTimer(wait)
		select {
		case <-j.ended:
		case <-t.C:
		case <-r.Context().Done():
		}
		t.Stop()
	}
	writeJSON(w, http.StatusOK, j.snapshot())
}

func (s *Server) handleCancel(w http.ResponseWriter, r *http.Request) {
	if j := s.lookup(w, r); j != nil {
		j.cancel()
		writeJSON(w, http.StatusAccepted, j.snapshot())
	}
}

// handleReport streams the job's report as it lies: the journal while the job runs, the
// report once it is done; nothing before its first result.
func (s *Server) handleReport(w http.ResponseWriter, r *http.Request) {
	j := s.lookup(w, r)
	if j == nil {
		return
	}
	j.mu.Lock()
	// A run interrupted before its first input leaves its report as it was: none of its own.
	started, running := j.started && j.state.Progress.Done > 0, j.state.State == StateRunning
	j.mu.Unlock()
	if blobio.IsURL(j.report) {
		writeError(w, http.StatusNotFound, errors.New("the report of a bucket job is the object "+j.report))
		return
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	if !started {
		w.WriteHeader(http.StatusOK)
		return
	}
	var f *os.File
	var err error
	if running {
		f, err = os.Open(folderrun.JournalPath(j.report))
	}
	if !running || errors.Is(err, os.ErrNotExist) { // the journal became the report meanwhile
		f, err = os.Open(j.report)
	}
	if err != nil {
		writeError(w, http.StatusInternalServerError, err)
		return
	}
	defer f.Close()
	w.WriteHeader(http.StatusOK)
	io.Copy(w, f)
}
