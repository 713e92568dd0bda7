package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/imgpipe/imgpipe/pipeline"
	"github.com/imgpipe/imgpipe/pipeline/folderrun"
)

const jobChain = "decode | resize width=16 height=16 fit=inside | save format=png"

func jobFile(in, out string, extra ...string) []byte {
	s := fmt.Sprintf("input: {dir: %q}\npipeline: %q\noutput: {dir: %q}\nexecution: {device: cpu}\n", in, jobChain, out)
	return []byte(s + strings.Join(extra, "\n"))
}

// submit posts a job and, when it is accepted, waits for it to end.
func submit(t *testing.T, s *Server, body []byte) (*httptest.ResponseRecorder, Job) {
	t.Helper()
	w := call(s, http.MethodPost, "/v1/jobs", body)
	var j Job
	if w.Code == http.StatusAccepted {
		if err := json.Unmarshal(w.Body.Bytes(), &j); err != nil || j.State != StateQueued || len(j.ID) != 16 {
			t.Fatalf("accepted job %s: %v", w.Body, err)
		}
		if w.Header().Get("Location") != "/v1/jobs/"+j.ID {
			t.Errorf("Location %q", w.Header().Get("Location"))
		}
		s.jobs.wait()
		j = getJob(t, s, j.ID)
	}
	return w, j
}

func getJob(t *testing.T, s *Server, id string) Job {
	t.Helper()
	w := call(s, http.MethodGet, "/v1/jobs/"+id, nil)
	var j Job
	if w.Code != 200 || json.Unmarshal(w.Body.Bytes(), &j) != nil {
		t.Fatalf("job %s: %d %s", id, w.Code, w.Body)
	}
	return j
}

// TestJobEndToEnd: a job runs as imgpipe run does: its outputs are a folder run's bytes,
// its report is the folder's report, and a second submission with resume skips it all.
func TestJobEndToEnd(t *testing.T) {
	root := t.TempDir()
	in, out := filepath.Join(root, "in"), filepath.Join(root, "out")
	writeImages(t, in, 5)
	s := newServer(t, Config{AllowRoots: []string{root}})
	w, j := submit(t, s, jobFile("in", out)) // a relative path is under the first root
	if w.Code != http.StatusAccepted {
		t.Fatalf("submit: %d %s", w.Code, w.Body)
	}
	if j.State != StateDone || j.ExitCode != 0 || j.Progress != (Progress{Done: 5, Total: 5, OK: 5}) || j.Summary == nil || j.Summary.OK != 5 {
		t.Fatalf("job %+v", j)
	}
	report := readAll(t, filepath.Join(out, folderrun.ReportName))
	rw := call(s, http.MethodGet, "/v1/jobs/"+j.ID+"/report", nil)
	if rw.Code != 200 || !bytes.Equal(rw.Body.Bytes(), report) || rw.Header().Get("Content-Type") != "application/x-ndjson" {
		t.Fatalf("report: %d %q, want the file's %d bytes", rw.Code, rw.Body, len(report))
	}
	want := t.TempDir()
	plan, err := pipeline.CompileSpec(jobChain)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pipeline.Run(context.Background(), plan, pipeline.Folder(in), pipeline.ToFolder(want), cpuExec().RunOptions()); err != nil {
		t.Fatal(err)
	}
	names, _ := filepath.Glob(filepath.Join(want, "*.png"))
	if len(names) != 5 {
		t.Fatalf("the folder run wrote %d files", len(names))
	}
	for _, name := range names {
		if got := readAll(t, filepath.Join(out, filepath.Base(name))); !bytes.Equal(got, readAll(t, name)) {
			t.Errorf("%s differs from the folder run's", filepath.Base(name))
		}
	}
	resumeJob := bytes.Replace(jobFile(in, out), []byte("{device: cpu}"), []byte("{device: cpu, resume: true}"), 1)
	_, r := submit(t, s, resumeJob)
	if r.State != StateDone || r.Progress.Skipped != 5 || r.Progress.OK != 0 {
		t.Fatalf("resumed job %+v", r)
	}
	lw := call(s, http.MethodGet, "/v1/jobs", nil)
	var list JobList
	if err := json.Unmarshal(lw.Body.Bytes(), &list); err != nil || len(list.Jobs) != 2 || list.Jobs[0].ID != j.ID {
		t.Fatalf("list %s: %v", lw.Body, err)
	}
}

// TestJobRefusals: a job is refused before anything runs when its file is wrong (400,
// each mistake at its line), when it names a path outside the allowed roots, through ..,
// a link or a bucket (403), or when the server has no root at all (403).
func TestJobRefusals(t *testing.T) {
	base := t.TempDir()
	root, outside := filepath.Join(base, "root"), filepath.Join(base, "outside")
	in, out := filepath.Join(root, "in"), filepath.Join(root, "out")
	writeImages(t, in, 1)
	writeImages(t, outside, 1)
	if err := os.Symlink(outside, filepath.Join(root, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(outside, "nothing"), filepath.Join(root, "dangling")); err != nil {
		t.Fatal(err)
	}
	s := newServer(t, Config{AllowRoots: []string{root}, MaxBody: 1 << 12})
	buckets := newServer(t, Config{AllowRoots: []string{root}, AllowBuckets: true})
	kernels := newServer(t, Config{AllowRoots: []string{root}, AllowKernels: true})
	for _, tc := range []struct {
		name   string
		s      *Server
		body   []byte
		status int
		want   string
	}{
		{"input outside", s, jobFile(outside, out), 403, "outside the folders"},
		{"output outside", s, jobFile(in, filepath.Join(outside, "out")), 403, "outside the folders"},
		{"dot dot", s, jobFile(filepath.Join(root, "..", "outside"), out), 403, "outside the folders"},
		{"relative dot dot", s, jobFile("../outside", out), 403, "outside the folders"},
		{"link out of the root", s, jobFile(filepath.Join(root, "link"), out), 403, "outside the folders"},
		{"output under a link", s, jobFile(in, filepath.Join(root, "link", "new", "out")), 403, "outside the folders"},
		{"dangling link", s, jobFile(in, filepath.Join(root, "dangling")), 403, "dangling"},
		{"report outside", s, []byte(fmt.Sprintf("input: {dir: %q}\npipeline: %q\noutput: {dir: %q, report: %q}\n", in, jobChain, out, filepath.Join(outside, "r.jsonl"))), 403, "output.report"},
		{"trace outside", s, bytes.Replace(jobFile(in, out), []byte("{device: cpu}"), []byte("{device: cpu, trace: /tmp/trace.json}"), 1), 403, "execution.trace"},
		{"bucket", s, jobFile("s3://bucket/in", out), 403, "buckets"},
		{"file bucket outside", buckets, jobFile("file://"+outside, out), 403, "outside the folders"},
		{"file bucket options", buckets, jobFile("file://"+in+"?secret_key_path=/etc/passwd", out), 403, "no options"},
		{"stdin", s, jobFile("-", out), 400, "standard stream"},
		{"bad yaml", s, []byte("input: {dir: x}\npipeline: decode | blurr | save\nouput: {dir: y}\n"), 400, "job.yaml:2:"},
		{"missing input", s, jobFile(filepath.Join(root, "none"), out), 400, "input folder"},
		{"output is input", s, jobFile(in, in), 400, "the output folder is the input folder"},
		{"kernel", s, []byte(fmt.Sprintf("input: {dir: %q}\npipeline: kernel src=/etc/passwd fn=f\noutput: {dir: %q}\n", in, out)), 400, "does not allow"},
		{"kernel file outside", kernels, []byte(fmt.Sprintf("input: {dir: %q}\npipeline: kernel src=/etc/passwd fn=f\noutput: {dir: %q}\n", in, out)), 400, "outside the folders"},
		{"kernel file relative", kernels, []byte(fmt.Sprintf("input: {dir: %q}\npipeline: kernel src=k.cu fn=f\noutput: {dir: %q}\n", in, out)), 400, "absolute path"},
		{"body too large", s, make([]byte, 1<<12+1), 413, "--max-body"},
		{"no roots", newServer(t, Config{}), jobFile(in, out), 403, "--allow-root"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := call(tc.s, http.MethodPost, "/v1/jobs", tc.body)
			if w.Code != tc.status {
				t.Fatalf("%d, want %d: %s", w.Code, tc.status, w.Body)
			}
			if e := errorOf(t, w); !strings.Contains(e.Error, tc.want) {
				t.Errorf("error %q, want it to name %q", e.Error, tc.want)
			}
		})
	}
	w := call(s, http.MethodPost, "/v1/jobs?name=dir/thumbs.yaml", []byte("input: {dir: x}\npipeline: decode | blurr | save\nouput: {dir: y}\n"))
	if e := errorOf(t, w); len(e.Errors) != 2 || !strings.HasPrefix(e.Errors[0], "thumbs.yaml:2:") || !strings.HasPrefix(e.Errors[1], "thumbs.yaml:3:") {
		t.Errorf("a job file's mistakes: %q", e.Errors)
	}
	if entries, _ := os.ReadDir(outside); len(entries) != 1 {
		t.Errorf("the folder outside the root holds %d entries, want its one image", len(entries))
	}
	if jobs := s.jobs.list(); len(jobs) != 0 {
		t.Errorf("refused jobs were registered: %+v", jobs)
	}
}

// TestJobLocked: one run per output folder, as imgpipe run: a job into a folder another
// run holds fails (exit 3) and leaves it alone.
func TestJobLocked(t *testing.T) {
	root := t.TempDir()
	in, out := filepath.Join(root, "in"), filepath.Join(root, "out")
	writeImages(t, in, 2)
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	lock, err := folderrun.LockFolder(out)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Unlock()
	s := newServer(t, Config{AllowRoots: []string{root}})
	_, j := submit(t, s, jobFile(in, out))
	if j.State != StateFailed || j.ExitCode != folderrun.ExitFatal || j.Error == "" || j.Summary != nil {
		t.Fatalf("job into a locked folder: %+v", j)
	}
	if entries, _ := os.ReadDir(out); len(entries) > 1 {
		t.Errorf("the locked folder holds %d entries", len(entries))
	}
	if w := call(s, http.MethodGet, "/v1/jobs/"+j.ID+"/report", nil); w.Code != 200 || w.Body.Len() != 0 {
		t.Errorf("report of a job that never started: %d %q", w.Code, w.Body)
	}
}

// TestJobCancel: a cancelled job ends cancelled (exit 130); DELETE answers 202 with the
// job, 404 for no job.
func TestJobCancel(t *testing.T) {
	root := t.TempDir()
	in, out := filepath.Join(root, "in"), filepath.Join(root, "out")
	writeImages(t, in, 3)
	s := newServer(t, Config{AllowRoots: []string{root}})
	req, err := s.jobRequest(httptest.NewRecorder(), httptest.NewRequest(http.MethodPost, "/v1/jobs", bytes.NewReader(jobFile(in, out))))
	if err != nil {
		t.Fatal(err)
	}
	p, err := folderrun.Prepare(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	j := newTask(cancel, req.ReportPath())
	id := s.jobs.add(j)
	if w := call(s, http.MethodDelete, "/v1/jobs/"+id, nil); w.Code != http.StatusAccepted {
		t.Fatalf("DELETE: %d %s", w.Code, w.Body)
	}
	s.runJob(ctx, j, id, p, req) // cancelled before its first input
	if got := getJob(t, s, id); got.State != StateCancelled || got.ExitCode != folderrun.ExitInterrupted {
		t.Fatalf("cancelled job %+v", got)
	}
	if w := call(s, http.MethodGet, "/v1/jobs/"+id+"/report", nil); w.Code != 200 || w.Body.Len() != 0 {
		t.Fatalf("report of a job cancelled before its first input: %d %q", w.Code, w.Body)
	}
	for _, target := range []string{"/v1/jobs/0123456789abcdef", "/v1/jobs/0123456789abcdef/report"} {
		method := http.MethodGet
		if !strings.HasSuffix(target, "report") {
			method = http.MethodDelete
		}
		if w := call(s, method, target, nil); w.Code != 404 {
			t.Fatalf("%s %s: %d", method, target, w.Code)
		} else {
			errorOf(t, w)
		}
	}
}

// TestRegistryBound: finished jobs past maxFinishedJobs are forgotten, oldest first;
// running ones never.
func TestRegistryBound(t *testing.T) {
	g := newRegistry()
	running := newTask(func() {}, "")
	first := g.add(running)
	var ids []string
	for range maxFinishedJobs + 2 {
		j := newTask(func() {}, "")
		ids = append(ids, g.add(j))
		j.state.State = StateDone
		g.done()
	}
	if g.get(first) == nil || g.get(ids[0]) != nil || g.get(ids[1]) != nil || g.get(ids[2]) == nil {
		t.Fatal("the registry forgot the wrong jobs")
	}
	if n := len(g.list()); n != maxFinishedJobs+1 {
		t.Fatalf("%d jobs kept", n)
	}
	running.state.State = StateDone
	g.done()
	g.wait()
}

// TestReportFiles: a running job's report is its journal, a finished one's the report,
// a bucket job's is not served.
func TestReportFiles(t *testing.T) {
	dir := t.TempDir()
	report := filepath.Join(dir, folderrun.ReportName)
	if err := os.WriteFile(folderrun.JournalPath(report), []byte("journal\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(report, []byte("report\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := newServer(t, Config{})
	for _, tc := range []struct {
		state, report string
		status        int
		want          string
	}{
		{StateRunning, report, 200, "journal\n"},
		{StateDone, report, 200, "report\n"},
		{StateCancelled, report, 200, "report\n"},
		{StateDone, "s3://bucket/out/" + folderrun.ReportName, 404, ""},
	} {
		j := newTask(func() {}, tc.report)
		id := s.jobs.add(j)
		j.state.State, j.started, j.state.Progress.Done = tc.state, true, 1
		w := call(s, http.MethodGet, "/v1/jobs/"+id+"/report", nil)
		if w.Code != tc.status || (tc.status == 200 && w.Body.String() != tc.want) {
			t.Errorf("%s %s: %d %q, want %d %q", tc.state, tc.report, w.Code, w.Body, tc.status, tc.want)
		}
	}
}
