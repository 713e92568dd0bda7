package server

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/imgpipe/imgpipe/engine"
	"github.com/imgpipe/imgpipe/pipeline"
)

// ReportHeader is the response header that carries a processed input's report line,
// compact JSON.
const ReportHeader = "Imgpipe-Report"

// contentTypes are the media types of save's formats (stages.SaveFormats).
var contentTypes = map[string]string{
	"png":  "image/png",
	"jpeg": "image/jpeg",
	"webp": "image/webp",
	"tiff": "image/tiff",
	"npy":  "application/x-npy",
}

// ContentType is the media type of a saved output in format (as save's format names it).
func ContentType(format string) string {
	if t, ok := contentTypes[format]; ok {
		return t
	}
	return "application/octet-stream"
}

// ProcessResult is the JSON of a process request with report=json: the report line and
// the output (none for a chain without save).
type ProcessResult struct {
	Report pipeline.ReportLine `json:"report"`
	Output []byte              `json:"output,omitempty"`
}

// handleProcess is POST /v1/process: one image through the chain of ?p= on the engine.
func (s *Server) handleProcess(w http.ResponseWriter, r *http.Request) {
	if !s.admit() {
		writeError(w, http.StatusServiceUnavailable, errors.New("the server is shutting down"))
		return
	}
	defer s.inFlight.Done()
	if s.slots != nil {
		select {
		case s.slots <- struct{}{}:
			defer func() { <-s.slots }()
		default:
			writeError(w, http.StatusTooManyRequests, errors.New("the server has --max-requests requests in progress"))
			return
		}
	}
	plan, res, err := s.process(w, r)
	if err != nil {
		answer(w, err)
		return
	}
	line := res.Line()
	w.Header().Set(ReportHeader, headerJSON(line))
	switch {
	case res.Status == pipeline.StatusFailed:
		writeError(w, http.StatusUnprocessableEntity, cmp.Or(res.Err, errors.New("the input failed")))
	case r.URL.Query().Get("report") == "json":
		writeJSON(w, http.StatusOK, ProcessResult{Report: line, Output: res.Encoded})
	case plan.Save == nil:
		writeJSON(w, http.StatusOK, line)
	default:
		w.Header().Set("Content-Type", ContentType(plan.Save.Options.Format))
		w.WriteHeader(http.StatusOK)
		w.Write(res.Encoded)
	}
}

// process compiles the request's chain, reads its image and runs it on the engine; the
// error is an *apiError with the status it is answered with.
func (s *Server) process(w http.ResponseWriter, r *http.Request) (*pipeline.Plan, pipeline.Result, error) {
	var res pipeline.Result
	deadline := time.Now().Add(s.cfg.RequestTimeout)
	spec := r.URL.Query().Get("p")
	if spec == "" {
		return nil, res, statusErr(http.StatusBadRequest, errors.New("no chain: give it as ?p=SPEC, e.g. p=decode|grayscale|save"))
	}
	if err := s.checkSignature(r, spec); err != nil {
		return nil, res, err
	}
	plan, err := s.plans.get(spec, s.checkRequestStages)
	if err != nil {
		return nil, res, err
	}
	// The upload counts in the request's time: a client that sends its body slowly holds a
	// connection and a place, as one whose chain runs long does.
	http.NewResponseController(w).SetReadDeadline(deadline) // unsupported (a test's recorder): none
	body, err := readBody(w, r, s.cfg.MaxBody)
	if err != nil {
		return nil, res, bodyError(err)
	}
	if len(body) == 0 {
		return nil, res, statusErr(http.StatusBadRequest, errors.New("no image in the body"))
	}
	ctx, cancel := context.WithDeadline(r.Context(), deadline)
	defer cancel()
	res, err = s.eng.Process(ctx, plan, pipeline.Input{Name: "request", Data: body})
	if err != nil {
		return nil, res, engineError(ctx, err)
	}
	return plan, res, nil
}

// engineError is the status of the engine's refusal or failure of a request.
func engineError(ctx context.Context, err error) error {
	switch {
	case errors.Is(err, engine.ErrBusy):
		return statusErr(http.StatusTooManyRequests, err)
	case errors.Is(err, engine.ErrClosed):
		return statusErr(http.StatusServiceUnavailable, err)
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return statusErr(http.StatusGatewayTimeout, errors.New("the request ran past --request-timeout"))
	case ctx.Err() != nil:
		return statusErr(statusClientGone, errors.New("the client left"))
	}
	return statusErr(http.StatusInternalServerError, err)
}

// statusClientGone is the status counted for a request whose client left before its
// answer (nginx's 499); nobody reads it.
const statusClientGone = 499

// answer writes err as its *apiError's status, or 500.
func answer(w http.ResponseWriter, err error) {
	var ae *apiError
	if !errors.As(err, &ae) {
		ae = statusErr(http.StatusInternalServerError, err)
	}
	writeError(w, ae.status, ae.err)
}

// maxPlans bounds the compiled chains a server keeps; past it the cache starts afresh.
const maxPlans = 256

// planCache keeps compiled chains by spec, so that a request pays no compile of a chain
// seen before (the engine's resident run of it is found by the plan's canonical spec).
type planCache struct {
	mu    sync.Mutex
	plans map[string]*pipeline.Plan
}

// get returns spec's plan, parsing it, checking its steps with check and compiling it
// when it is new; a bad chain is a 400 naming its mistakes.
func (c *planCache) get(spec string, check func([]pipeline.Step) error) (*pipeline.Plan, error) {
	c.mu.Lock()
	plan := c.plans[spec]
	c.mu.Unlock()
	if plan != nil {
		return plan, nil
	}
	steps, err := pipeline.ParseSpec(spec)
	if steps == nil {
		return nil, statusErr(http.StatusBadRequest, err)
	}
	if err := check(steps); err != nil {
		return nil, err
	}
	if plan, err = pipeline.Compile(steps); err != nil {
		return nil, statusErr(http.StatusBadRequest, err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.plans) >= maxPlans || c.plans == nil {
		c.plans = map[string]*pipeline.Plan{}
	}
	c.plans[spec] = plan
	return plan, nil
}

// headerJSON is a report line's compact JSON in ASCII, as a header value should be: the
// runes past ASCII (a reason's "×") as \u escapes, which only strings hold.
func headerJSON(line pipeline.ReportLine) string {
	b, _ := json.Marshal(line) // a report line always marshals
	var sb strings.Builder
	for _, r := range string(b) {
		if r < utf8.RuneSelf {
			sb.WriteRune(r)
			continue
		}
		for _, u := range utf16.Encode([]rune{r}) {
			fmt.Fprintf(&sb, `\u%04x`, u)
		}
	}
	return sb.String()
}

// readBody reads r's body, at most limit bytes (*http.MaxBytesError past it). A body that
// declares its length is read into a buffer of that size: a photo of megabytes would
// otherwise be copied a dozen times as the buffer grows.
func readBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, error) {
	body := http.MaxBytesReader(w, r.Body, limit)
	if n := r.ContentLength; n > limit {
		return nil, &http.MaxBytesError{Limit: limit}
	} else if n > 0 {
		b := make([]byte, n)
		if _, err := io.ReadFull(body, b); err != nil {
			return nil, err
		}
		return b, nil
	}
	return io.ReadAll(body)
}
