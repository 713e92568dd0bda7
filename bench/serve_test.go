package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/imgpipe/imgpipe/pipeline"
)

func TestPercentile(t *testing.T) {
	ms := func(v ...int) []time.Duration {
		out := make([]time.Duration, len(v))
		for i, x := range v {
			out[i] = time.Duration(x) * time.Millisecond
		}
		return out
	}
	hundred := make([]time.Duration, 100)
	for i := range hundred {
		hundred[i] = time.Duration(i+1) * time.Millisecond
	}
	tests := []struct {
		name   string
		sorted []time.Duration
		p      float64
		want   time.Duration
	}{
		{"none", nil, 50, 0},
		{"one", ms(7), 50, 7 * time.Millisecond},
		{"one p100", ms(7), 100, 7 * time.Millisecond},
		{"two p50 is the lower", ms(1, 9), 50, time.Millisecond},
		{"two p51 is the upper", ms(1, 9), 51, 9 * time.Millisecond},
		{"hundred p50", hundred, 50, 50 * time.Millisecond},
		{"hundred p90", hundred, 90, 90 * time.Millisecond},
		{"hundred p99", hundred, 99, 99 * time.Millisecond},
		{"hundred p99.5", hundred, 99.5, 100 * time.Millisecond},
		{"hundred max", hundred, 100, 100 * time.Millisecond},
		{"tiny p", ms(3, 4, 5), 0.001, 3 * time.Millisecond},
	}
	for _, tt := range tests {
		if got := percentile(tt.sorted, tt.p); got != tt.want {
			t.Errorf("%s: percentile(%v) = %v, want %v", tt.name, tt.p, got, tt.want)
		}
	}
}

func TestPhaseSummary(t *testing.T) {
	s := []sample{
		{outcome: outcome{code: "ok", ok: true}, lat: 30 * time.Millisecond, mp: 2},
		{outcome: outcome{code: "ok", ok: true}, lat: 10 * time.Millisecond, mp: 2},
		{outcome: outcome{code: "429", err: errors.New("queue full")}, lat: time.Millisecond},
		{outcome: outcome{code: "429", err: errors.New("later")}},
		{outcome: outcome{code: "transport"}},
	}
	p := phase("saturated", s, 2*time.Second)
	if p.Requests != 5 || p.OK != 2 || p.ReqPerS != 1 || p.MpixPerS != 2 {
		t.Errorf("counts and rates: %+v", p)
	}
	if p.LatencyMS != (Latency{P50: 10, P90: 30, P99: 30, Max: 30}) {
		t.Errorf("latency %+v: failed requests must not count", p.LatencyMS)
	}
	if p.Errors["429"] != 2 || p.Errors["transport"] != 1 || p.FirstErrors["429"] != "queue full" {
		t.Errorf("errors %v, first %v", p.Errors, p.FirstErrors)
	}
	if got, want := p.errorsText(), "429: 2 (first: queue full), transport: 1"; got != want {
		t.Errorf("errorsText = %q, want %q", got, want)
	}
	if empty := phase("x", nil, 0); empty.ReqPerS != 0 || empty.errorsText() != "none" {
		t.Errorf("an empty phase: %+v", empty)
	}
}

func TestArrivals(t *testing.T) {
	fixed := arrivals(4, 5, false, nil)
	for i, at := range fixed {
		if want := time.Duration(i) * 250 * time.Millisecond; at != want {
			t.Errorf("fixed arrival %d at %v, want %v", i, at, want)
		}
	}
	const n, rate = 20000, 100.0
	a := arrivals(rate, n, true, rand.New(rand.NewPCG(1, 2)))
	if a[0] != 0 {
		t.Errorf("the first arrival is at %v, want the start", a[0])
	}
	for i := 1; i < n; i++ {
		if a[i] < a[i-1] {
			t.Fatalf("arrival %d at %v before arrival %d at %v", i, a[i], i-1, a[i-1])
		}
	}
	// n exponential gaps of mean 1/rate: the span's relative spread is 1/√n, under 1%.
	if span, want := a[n-1].Seconds(), (n-1)/rate; math.Abs(span-want)/want > 0.03 {
		t.Errorf("Poisson arrivals span %.2f s, want about %.2f s", span, want)
	}
	if b := arrivals(rate, n, true, rand.New(rand.NewPCG(1, 2))); b[n-1] != a[n-1] {
		t.Error("the same seed gave other arrivals")
	}
}

func TestServeConfigCheck(t *testing.T) {
	ok := func() ServeConfig { return ServeConfig{Dir: ".", Clients: 4, Duration: time.Second, WarmRequests: -1} }
	tests := []struct {
		name string
		edit func(*ServeConfig)
		want string // "" for no error
	}{
		{"defaults", func(*ServeConfig) {}, ""},
		{"url", func(c *ServeConfig) { c.URL = "http://127.0.0.1:8080" }, ""},
		{"get", func(c *ServeConfig) { c.Get = "http://127.0.0.1:8081/x/{name}" }, ""},
		{"both targets", func(c *ServeConfig) { c.URL, c.Get = "http://a:1", "http://b:2/{name}" }, "--url and --get"},
		{"url scheme", func(c *ServeConfig) { c.URL = "ftp://a:1" }, "--url"},
		{"url no host", func(c *ServeConfig) { c.URL = "http://" }, "--url"},
		{"get no name", func(c *ServeConfig) { c.Get = "http://a:1/x" }, "no {name}"},
		{"get not a URL", func(c *ServeConfig) { c.Get = "/x/{name}" }, "--get"},
		{"token without url", func(c *ServeConfig) { c.Token = "t" }, "--token"},
		{"no clients", func(c *ServeConfig) { c.Clients = 0 }, "--clients 0"},
		{"too many clients", func(c *ServeConfig) { c.Clients = MaxClients + 1 }, "--clients"},
		{"negative requests", func(c *ServeConfig) { c.Requests = -1 }, "--requests"},
		{"no duration", func(c *ServeConfig) { c.Duration = 0 }, "--duration"},
		{"duration ignored with requests", func(c *ServeConfig) { c.Duration, c.Requests = 0, 10 }, ""},
		{"long duration", func(c *ServeConfig) { c.Duration = 2 * MaxDuration }, "--duration"},
		{"negative delay", func(c *ServeConfig) { c.Delay = -time.Millisecond }, "--delay"},
		{"load zero", func(c *ServeConfig) { c.Load = []float64{0.5, 0} }, "--load 0"},
		{"load over one", func(c *ServeConfig) { c.Load = []float64{1.5} }, "--load 1.5"},
		{"load NaN", func(c *ServeConfig) { c.Load = []float64{math.NaN()} }, "--load NaN"},
		{"folder files", func(c *ServeConfig) { c.FolderFiles = -2 }, "--folder-rate"},
		{"rss every", func(c *ServeConfig) { c.RSSEvery = -1 }, "--rss-every"},
		{"rss pid", func(c *ServeConfig) { c.RSSPid = -1 }, "--rss-pid"},
		{"warm requests", func(c *ServeConfig) { c.WarmRequests = MaxRequests + 1 }, "--warm-requests"},
	}
	for _, tt := range tests {
		c := ok()
		tt.edit(&c)
		err := c.Check()
		var oe *OptionError
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%s: %v", tt.name, err)
		case tt.want != "" && (err == nil || !errors.As(err, &oe) || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("%s: error %v, want an option error naming %q", tt.name, err, tt.want)
		}
	}
	c := ok()
	if err := c.Check(); err != nil || c.WarmRequests != 8 || c.Spec != ThumbnailSpec {
		t.Errorf("defaults: %v, warm-up %d, spec %q", err, c.WarmRequests, c.Spec)
	}
}

func TestGetURL(t *testing.T) {
	tests := []struct{ tmpl, name, want string }{
		{"http://h/plain/local:///{name}@jpg", "a.jpg", "http://h/plain/local:///a.jpg@jpg"},
		{"http://h/{name}", "sub dir/b#1.jpg", "http://h/sub%20dir/b%231.jpg"},
		{"http://h/{name}?again={name}", "x/y.png", "http://h/x/y.png?again=x/y.png"},
	}
	for _, tt := range tests {
		if got := getURL(tt.tmpl, tt.name); got != tt.want {
			t.Errorf("getURL(%q, %q) = %q, want %q", tt.tmpl, tt.name, got, tt.want)
		}
	}
}

// servePhotos writes n small PNG photos, two in a subfolder, and returns their folder.
func servePhotos(t *testing.T, n int) string {
	t.Helper()
	dir := t.TempDir()
	for i := range n {
		name := filepath.Join(dir, string(rune('a'+i))+".png")
		if i < 2 {
			name = filepath.Join(dir, "sub", string(rune('a'+i))+".png")
		}
		photoPNG(t, name, 40+i, 30, uint64(i))
	}
	if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("not a photo"), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestLoadPhotos(t *testing.T) {
	dir := servePhotos(t, 3)
	ps, err := loadPhotos(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(ps) != 3 || ps[0].name != "c.png" || ps[1].name != "sub/a.png" || ps[1].mp != 40*30/1e6 {
		t.Errorf("photos %v", ps)
	}
	var oe *OptionError
	if _, err := loadPhotos(t.TempDir()); !errors.As(err, &oe) || !strings.Contains(err.Error(), "no .jpg") {
		t.Errorf("an empty folder: %v", err)
	}
	if _, err := loadPhotos(filepath.Join(dir, "missing")); !errors.As(err, &oe) {
		t.Errorf("a missing folder: %v", err)
	}
}

// TestServeHTTP loads a stand-in for imgpipe serve: the requests it sees follow
// docs/serve.md, and its refusals are counted by status.
func TestServeHTTP(t *testing.T) {
	dir := servePhotos(t, 3)
	want, err := os.ReadFile(filepath.Join(dir, "sub", "a.png"))
	if err != nil {
		t.Fatal(err)
	}
	var calls, sawPhoto atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if r.Method != http.MethodPost || r.URL.Path != "/v1/process" || r.URL.Query().Get("p") != ThumbnailSpec || r.Header.Get("Authorization") != "Bearer tok" {
			http.Error(w, "bad request "+r.URL.String(), http.StatusBadRequest)
			return
		}
		if bytes.Equal(body, want) {
			sawPhoto.Add(1)
		}
		if calls.Add(1)%4 == 0 {
			w.Header().Set("Retry-After", "1")
			http.Error(w, `{"error": "queue full", "status": 429}`, http.StatusTooManyRequests)
			return
		}
		w.Header().Set("Content-Type", "image/jpeg")
		w.Write([]byte("thumbnail"))
	}))
	defer srv.Close()
	var text, js bytes.Buffer
	rep, err := Serve(context.Background(), ServeConfig{Dir: dir, URL: srv.URL + "/", Token: "tok", Clients: 2,
		Requests: 12, WarmRequests: 0, Text: &text, JSON: &js})
	if err != nil {
		t.Fatal(err)
	}
	s := rep.Saturated
	if s.Requests != 12 || s.OK != 9 || s.Errors["429"] != 3 || s.FirstErrors["429"] == "" || sawPhoto.Load() != 4 {
		t.Errorf("saturated %+v; the server saw sub/a.png %d times", s, sawPhoto.Load())
	}
	if s.Batches != nil || rep.Device != "" || rep.Folder != nil {
		t.Errorf("an HTTP load has no engine here: %+v", rep)
	}
	var back ServeReport
	if err := json.Unmarshal(js.Bytes(), &back); err != nil || back.Saturated.OK != 9 || back.Target != srv.URL+"/" {
		t.Errorf("--json: %v %s", err, js.String())
	}
	if !strings.Contains(text.String(), "429: 3") {
		t.Errorf("text output:\n%s", text.String())
	}
}

// TestServeGetDown: a peer that is not there fails the warm-up with the transport's error.
func TestServeGetDown(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	_, err := Serve(context.Background(), ServeConfig{Dir: servePhotos(t, 1), Get: url + "/{name}", Clients: 1, Requests: 1, WarmRequests: -1})
	if err == nil || !strings.Contains(err.Error(), "transport") {
		t.Errorf("err %v, want the warm-up's transport failure", err)
	}
}

// TestServeInProcessCPU is the smoke test: an engine on the CPU, a saturated run, an open
// loop, a folder run and RSS readings.
func TestServeInProcessCPU(t *testing.T) {
	dir := servePhotos(t, 3)
	exec := pipeline.DefaultExecution()
	exec.Device = "cpu"
	var text bytes.Buffer
	rep, err := Serve(context.Background(), ServeConfig{Dir: dir, Exec: exec, Spec: "decode | resize width=16 height=16 fit=inside | save format=jpeg quality=75",
		Clients: 3, Requests: 9, WarmRequests: 3, Load: []float64{0.5}, FolderFiles: 5, RSSEvery: 3, Text: &text})
	if err != nil {
		t.Fatal(err)
	}
	if s := rep.Saturated; s.OK != 9 || s.Errors != nil || s.ReqPerS <= 0 || s.LatencyMS.Max <= 0 || s.Clients != 3 {
		t.Errorf("saturated %+v", s)
	}
	if len(rep.Loads) != 1 || rep.Loads[0].OK != 9 || rep.Loads[0].TargetRate != round3(rep.Saturated.ReqPerS/2) {
		t.Errorf("loads %+v", rep.Loads)
	}
	if f := rep.Folder; f == nil || f.OK != 5 || f.Files != 5 || f.ServeRatio <= 0 {
		t.Errorf("folder %+v", f)
	}
	if len(rep.RSSSamples) != 3 || rep.RSS == nil || rep.RSS.PeakMiB < rep.RSS.MiB || rep.Device != "cpu" {
		t.Errorf("RSS %+v, samples %v, device %q", rep.RSS, rep.RSSSamples, rep.Device)
	}
	for _, want := range []string{"saturated (3 clients)", "load 0.5 (open loop", "folder run (5 files", "RSS after 9 requests"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("no %q in\n%s", want, text.String())
		}
	}
}

func TestServeBadChain(t *testing.T) {
	_, err := Serve(context.Background(), ServeConfig{Dir: servePhotos(t, 1), Spec: "decode | nosuch", Clients: 1, Requests: 1})
	var oe *OptionError
	if !errors.As(err, &oe) || !strings.Contains(err.Error(), "nosuch") {
		t.Errorf("err %v, want an option error naming the stage", err)
	}
}
