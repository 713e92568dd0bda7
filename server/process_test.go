package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	"github.com/imgpipe/imgpipe/engine"
	"github.com/imgpipe/imgpipe/pipeline"
	"github.com/imgpipe/imgpipe/stages"
	"github.com/imgpipe/imgpipe/stages/npy"
)

const thumb = "decode | resize width=16 height=16 fit=inside | save format=png"

func processURL(spec string, extra ...string) string {
	q := url.Values{"p": {spec}}
	for i := 0; i+1 < len(extra); i += 2 {
		q.Set(extra[i], extra[i+1])
	}
	return "/v1/process?" + q.Encode()
}

// TestProcessStatuses: every answer of POST /v1/process that one request can bring about.
func TestProcessStatuses(t *testing.T) {
	s := newServer(t, Config{MaxBody: 1 << 16})
	img := pngImage(t)
	for _, tc := range []struct {
		name   string
		target string
		body   []byte
		status int
		want   string // in the error, or the Content-Type of a 200
	}{
		{"png", processURL(thumb), img, 200, "image/png"},
		{"jpeg", processURL("decode | save format=jpeg quality=80"), img, 200, "image/jpeg"},
		{"tiff", processURL("decode | grayscale | save format=tiff"), img, 200, "image/tiff"},
		{"report only", processURL("decode | histogram"), img, 200, "application/json"},
		{"report json", processURL(thumb, "report", "json"), img, 200, "application/json"},
		{"no chain", "/v1/process", img, 400, "no chain"},
		{"unknown stage", processURL("decode | blurr sigma=1 | save"), img, 400, `did you mean "blur"`},
		{"bad parameter", processURL("decode | resize width=-3 | save"), img, 400, "width"},
		{"no body", processURL(thumb), nil, 400, "no image"},
		{"body too large", processURL(thumb), make([]byte, 1<<16+1), 413, "--max-body"},
		{"corrupt image", processURL(thumb), img[:len(img)/2], 422, "decode"},
		{"not an image", processURL(thumb), []byte("hello"), 422, "decode"},
		{"kernel refused", processURL("decode | kernel source=x fn=f | save"), img, 403, "does not allow"},
		{"wrong method", processURL(thumb), nil, 405, "method"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			method := http.MethodPost
			if tc.status == 405 {
				method = http.MethodGet
			}
			w := call(s, method, tc.target, tc.body)
			if w.Code != tc.status {
				t.Fatalf("status %d, want %d: %s", w.Code, tc.status, w.Body)
			}
			if tc.status != 200 {
				if e := errorOf(t, w); !bytes.Contains([]byte(e.Error), []byte(tc.want)) {
					t.Errorf("error %q, want it to name %q", e.Error, tc.want)
				}
				return
			}
			if ct := w.Header().Get("Content-Type"); ct != tc.want {
				t.Errorf("Content-Type %q, want %q", ct, tc.want)
			}
			var line pipeline.ReportLine
			if err := json.Unmarshal([]byte(w.Header().Get(ReportHeader)), &line); err != nil || line.Status != pipeline.StatusOK || line.Input != "request" {
				t.Errorf("report header %q: %v", w.Header().Get(ReportHeader), err)
			}
		})
	}
}

func TestWrongMethodAllow(t *testing.T) {
	s := newServer(t, Config{})
	w := call(s, http.MethodPut, "/v1/jobs/x", nil)
	if w.Code != 405 || w.Header().Get("Allow") == "" {
		t.Fatalf("%d Allow %q", w.Code, w.Header().Get("Allow"))
	}
	errorOf(t, w)
	if w := call(s, http.MethodGet, "/v2/nothing", nil); w.Code != 404 {
		t.Fatalf("unknown route: %d", w.Code)
	} else {
		errorOf(t, w)
	}
}

// TestProcessOutputs: the bytes answered are what the same chain writes into a folder
// (pipeline.Run with ToFolder, as imgpipe run does), and the JSON variants carry them.
func TestProcessOutputs(t *testing.T) {
	s := newServer(t, Config{})
	img := pngImage(t)
	for _, spec := range []string{thumb, "decode | blur sigma=1.5 | save format=jpeg quality=75", "decode | rotate angle=90 | save format=png compression=6"} {
		want := folderOutput(t, spec, img)
		w := call(s, http.MethodPost, processURL(spec), img)
		if w.Code != 200 || !bytes.Equal(w.Body.Bytes(), want) {
			t.Fatalf("%s: status %d, %d bytes, want the folder run's %d", spec, w.Code, w.Body.Len(), len(want))
		}
		w = call(s, http.MethodPost, processURL(spec, "report", "json"), img)
		var res ProcessResult
		if err := json.Unmarshal(w.Body.Bytes(), &res); err != nil || !bytes.Equal(res.Output, want) || res.Report.Status != pipeline.StatusOK {
			t.Fatalf("%s: report=json %v, %d bytes", spec, err, len(res.Output))
		}
	}
	w := call(s, http.MethodPost, processURL("decode | histogram"), img)
	var line pipeline.ReportLine
	if err := json.Unmarshal(w.Body.Bytes(), &line); err != nil || len(line.Histogram) != 256 || line.Width != 40 {
		t.Fatalf("report-only chain: %v %+v", err, line)
	}
}

func TestContentTypes(t *testing.T) {
	for _, f := range stages.SaveFormats() {
		if ContentType(f) == "application/octet-stream" {
			t.Errorf("save format %s has no media type", f)
		}
	}
}

// TestProcessLimits: --max-requests in progress answer 429 with Retry-After (the engine's
// ErrBusy is mapped to the same in TestEngineError's table; the engine's tests make
// it); a draining server and a closed engine 503; a request past its time 504.
func TestProcessLimits(t *testing.T) {
	img := pngImage(t)
	t.Run("max requests", func(t *testing.T) {
		s := newServer(t, Config{MaxRequests: 1})
		s.slots <- struct{}{} // a request in progress
		w := call(s, http.MethodPost, processURL(thumb), img)
		if w.Code != 429 || w.Header().Get("Retry-After") == "" {
			t.Fatalf("%d Retry-After %q", w.Code, w.Header().Get("Retry-After"))
		}
		errorOf(t, w)
		<-s.slots
		if w := call(s, http.MethodPost, processURL(thumb), img); w.Code != 200 {
			t.Fatalf("after the slot was freed: %d %s", w.Code, w.Body)
		}
	})
	t.Run("timeout", func(t *testing.T) {
		s := newServer(t, Config{RequestTimeout: 1})
		if w := call(s, http.MethodPost, processURL(thumb), img); w.Code != 504 {
			t.Fatalf("%d %s", w.Code, w.Body)
		} else {
			errorOf(t, w)
		}
	})
	t.Run("engine closed", func(t *testing.T) {
		e := newEngine(t, engine.Config{})
		s, err := New(e, Config{})
		if err != nil {
			t.Fatal(err)
		}
		e.Close()
		for _, target := range []string{processURL(thumb), "/readyz"} {
			method := http.MethodPost
			if target == "/readyz" {
				method = http.MethodGet
			}
			if w := call(s, method, target, img); w.Code != 503 {
				t.Fatalf("%s: %d %s", target, w.Code, w.Body)
			} else {
				errorOf(t, w)
			}
		}
	})
}

func TestEngineError(t *testing.T) {
	timedOut, cancel := context.WithTimeout(context.Background(), 0)
	defer cancel()
	left, leave := context.WithCancel(context.Background())
	leave()
	for _, tc := range []struct {
		ctx    context.Context
		err    error
		status int
	}{
		{context.Background(), engine.ErrBusy, 429},
		{context.Background(), engine.ErrClosed, 503},
		{timedOut, context.DeadlineExceeded, 504},
		{left, context.Canceled, statusClientGone},
		{context.Background(), errors.New("cuda: illegal address"), 500},
	} {
		var ae *apiError
		if !errors.As(engineError(tc.ctx, tc.err), &ae) || ae.status != tc.status {
			t.Errorf("%v: %v, want %d", tc.err, ae, tc.status)
		}
	}
}

// TestProcessArrays: an array chain (load) takes a .npy body as well.
func TestProcessArrays(t *testing.T) {
	s := newServer(t, Config{})
	var b bytes.Buffer
	if err := npy.Write(&b, &npy.Array{Shape: []int{2, 3}, Data: []float32{1, 2, 3, 4, 5, 6}}); err != nil {
		t.Fatal(err)
	}
	w := call(s, http.MethodPost, processURL("load | sum"), b.Bytes())
	var line pipeline.ReportLine
	if err := json.Unmarshal(w.Body.Bytes(), &line); err != nil || w.Code != 200 || line.Reductions["sum"] != 21 {
		t.Fatalf("load | sum: %d %s", w.Code, w.Body)
	}
	w = call(s, http.MethodPost, processURL("load | save format=npy"), b.Bytes())
	if w.Code != 200 || w.Header().Get("Content-Type") != "application/x-npy" || !bytes.Equal(w.Body.Bytes(), b.Bytes()) {
		t.Fatalf("load | save: %d %q, %d bytes", w.Code, w.Header().Get("Content-Type"), w.Body.Len())
	}
}

func TestHeaderJSON(t *testing.T) {
	line := pipeline.ReportLine{Input: "request", Status: pipeline.StatusFailed, Error: "decode: 9000×9000 is over the limit 🙂"}
	h := headerJSON(line)
	for _, c := range []byte(h) {
		if c >= 0x80 || c < 0x20 {
			t.Fatalf("header %q is not printable ASCII", h)
		}
	}
	var back pipeline.ReportLine
	if err := json.Unmarshal([]byte(h), &back); err != nil || back.Error != line.Error {
		t.Fatalf("%q reads back as %+v: %v", h, back, err)
	}
}

// TestSlowBody: a client that stops sending its body is answered 408 once the request's
// time is up, on a real connection, rather than holding its place.
func TestSlowBody(t *testing.T) {
	s := newServer(t, Config{RequestTimeout: 300 * time.Millisecond})
	hs := httptest.NewServer(s)
	defer hs.Close()
	conn, err := net.Dial("tcp", hs.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\npartial", processURL(thumb))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusRequestTimeout {
		t.Fatalf("%d, want 408", resp.StatusCode)
	}
}
