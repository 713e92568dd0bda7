package pipeline

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math/rand"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/imgpipe/imgpipe/stages"
	"github.com/imgpipe/imgpipe/stages/stagestest"
)

// Results, report lines and progress come in input order however the workers finish, and
// each result is the chain applied to its own input.
func TestRunKeepsInputOrder(t *testing.T) {
	base := runtime.NumGoroutine()
	reg := testStages(t)
	plan := compileWith(t, reg, "decode | jitter | grayscale | histogram")
	rng := rand.New(rand.NewSource(1))
	const n = 120
	var inputs []Input
	var want []*stages.Image
	for i := 0; i < n; i++ {
		m := stagestest.ReadImage(rng, 1+rng.Intn(40), 1+rng.Intn(30), 3)
		inputs = append(inputs, Input{Name: fmt.Sprintf("img%03d.png", i), Data: stagestest.Encode(t, m, "png")})
		g := stages.NewImage(m.W, m.H, 1)
		stages.Grayscale(g, m)
		want = append(want, g)
	}
	var report bytes.Buffer
	var progress []int
	sink := Collect()
	sum, err := Run(context.Background(), plan, Inputs(inputs...), sink, Options{
		Workers: 8, Report: &report,
		Progress: func(r *Result) { progress = append(progress, r.Index) },
	})
	if err != nil {
		t.Fatal(err)
	}
	if sum.OK != n || sum.Failed != 0 || sum.Workers != 8 || sum.Device != "cpu" {
		t.Errorf("summary %+v", sum)
	}
	for i, r := range sink.Results {
		if r.Index != i || r.Input != inputs[i].Name || progress[i] != i {
			t.Fatalf("result %d is input %d (%s), progress %d", i, r.Index, r.Input, progress[i])
		}
		if stagestest.Diff(r.Image, want[i]) != "" {
			t.Fatalf("result %d: wrong pixels", i)
		}
		var h [256]uint64
		stages.Histogram(&h, want[i])
		if *r.Histogram != h {
			t.Fatalf("result %d: wrong histogram", i)
		}
	}
	lines := reportLines(t, report.String())
	if len(lines) != n+1 {
		t.Fatalf("%d report lines", len(lines))
	}
	for i, l := range lines[:n] {
		var rl ReportLine
		if err := json.Unmarshal([]byte(l), &rl); err != nil || rl.Input != inputs[i].Name {
			t.Fatalf("line %d: %q (%v)", i, l, err)
		}
	}
	checkNoLeaks(t, base)
}

// countingSource yields n random images, recording how many inputs are in flight (taken
// and not yet reported) each time one is taken.
type countingSource struct {
	n, taken  int
	done      *atomic.Int64
	maxFlight int
	rng       *rand.Rand
	data      []byte
}

func (s *countingSource) Next(ctx context.Context) (Input, error) {
	if s.taken == s.n {
		return Input{}, io.EOF
	}
	s.taken++
	if f := s.taken - int(s.done.Load()); f > s.maxFlight {
		s.maxFlight = f
	}
	return Input{Name: fmt.Sprint(s.taken), Data: s.data}, nil
}

type slowSink struct {
	done  *atomic.Int64
	delay time.Duration
}

func (s slowSink) Write(context.Context, *Result, *Encoder) error { return nil }
func (s slowSink) Done(context.Context, *Result) error {
	time.Sleep(s.delay)
	s.done.Add(1)
	return nil
}

// The inputs in flight never exceed the window, whatever the source's size and however
// slow the consumer: memory is bounded independently of the number of inputs.
func TestRunBoundsInputsInFlight(t *testing.T) {
	rng := rand.New(rand.NewSource(2))
	data := stagestest.Encode(t, stagestest.ReadImage(rng, 64, 64, 3), "png")
	plan := compileWith(t, Builtin, "decode | grayscale")
	for _, tt := range []struct{ workers, window int }{{1, 0}, {4, 0}, {4, 5}, {3, 1}, {8, 64}} {
		t.Run(fmt.Sprintf("workers=%d,window=%d", tt.workers, tt.window), func(t *testing.T) {
			var done atomic.Int64
			src := &countingSource{n: 300, done: &done, data: data}
			sum, err := Run(context.Background(), plan, src, slowSink{done: &done, delay: 50 * time.Microsecond},
				Options{Workers: tt.workers, Window: tt.window})
			if err != nil || sum.OK != 300 {
				t.Fatalf("%+v %v", sum, err)
			}
			window := tt.window
			if window == 0 {
				window = 2 * tt.workers
			}
			window = max(window, tt.workers)
			if src.maxFlight > window {
				t.Errorf("%d inputs in flight, window %d", src.maxFlight, window)
			}
			if src.maxFlight < min(window, 2) {
				t.Errorf("only %d in flight: the window is not used", src.maxFlight)
			}
		})
	}
}

// endless yields random images until cancelled, and counts them.
type endless struct {
	data  []byte
	taken atomic.Int64
}

func (s *endless) Next(ctx context.Context) (Input, error) {
	n := s.taken.Add(1)
	return Input{Name: fmt.Sprint(n), Data: s.data}, nil
}

// Cancelling the context stops the run: no new inputs, the ones in progress are finished
// and reported, the report still ends with its summary, and every goroutine ends.
func TestRunCancel(t *testing.T) {
	base := runtime.NumGoroutine()
	rng := rand.New(rand.NewSource(3))
	src := &endless{data: stagestest.Encode(t, stagestest.ReadImage(rng, 32, 32, 3), "png")}
	plan := compileWith(t, Builtin, "decode | blur sigma=2 | histogram")
	ctx, cancel := context.WithCancel(context.Background())
	var report bytes.Buffer
	var seen int
	sum, err := Run(ctx, plan, src, Collect(), Options{Workers: 4, Report: &report, Progress: func(*Result) {
		seen++
		if seen == 25 {
			cancel()
		}
	}})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v", err)
	}
	if !sum.Interrupted || sum.OK < 25 || sum.Failed != 0 {
		t.Errorf("summary %+v", sum)
	}
	// Everything taken from the source was either reported or never started; at most a
	// window's worth was taken after the cancel.
	if taken := int(src.taken.Load()); taken > sum.OK+8+1 {
		t.Errorf("%d taken, %d reported", taken, sum.OK)
	}
	lines := reportLines(t, report.String())
	if len(lines) != sum.OK+1 || !strings.Contains(lines[len(lines)-1], `"interrupted":true`) {
		t.Errorf("%d lines for %d ok; summary %s", len(lines), sum.OK, lines[len(lines)-1])
	}
	checkNoLeaks(t, base)
}

// A context cancelled while the consumer of ToChan no longer reads ends the run too.
func TestRunCancelWithBlockedSink(t *testing.T) {
	base := runtime.NumGoroutine()
	rng := rand.New(rand.NewSource(4))
	src := &endless{data: stagestest.Encode(t, stagestest.ReadImage(rng, 8, 8, 3), "png")}
	ctx, cancel := context.WithCancel(context.Background())
	ch := make(chan Result)
	go func() {
		for i := 0; i < 10; i++ {
			<-ch
		}
		cancel() // and stop reading
	}()
	sum, err := Run(ctx, compileWith(t, Builtin, "decode"), src, ToChan(ch), Options{Workers: 2})
	if !errors.Is(err, context.Canceled) || !sum.Interrupted {
		t.Fatalf("%+v %v", sum, err)
	}
	checkNoLeaks(t, base)
}

func badAmongGood(t *testing.T, n, bad int) []Input {
	rng := rand.New(rand.NewSource(5))
	var in []Input
	for i := 0; i < n; i++ {
		d := stagestest.Encode(t, stagestest.ReadImage(rng, 16, 16, 3), "png")
		if i == bad {
			d = d[:len(d)/2]
		}
		in = append(in, Input{Name: fmt.Sprintf("%02d.png", i), Data: d})
	}
	return in
}

func TestRunOnErrorSkip(t *testing.T) {
	in := badAmongGood(t, 40, 7)
	sink := Collect()
	sum, err := Run(context.Background(), compileWith(t, Builtin, "decode | grayscale"), Inputs(in...), sink, Options{Workers: 4})
	if err != nil {
		t.Fatal(err)
	}
	if sum.OK != 39 || sum.Failed != 1 || len(sink.Results) != 40 {
		t.Fatalf("summary %+v, %d results", sum, len(sink.Results))
	}
	r := sink.Results[7]
	if r.Status != StatusFailed || r.Image != nil || !strings.HasPrefix(r.Err.Error(), "decode: ") {
		t.Errorf("bad input: %+v", r)
	}
	var se *StageError
	if !errors.As(r.Err, &se) || se.Stage != "decode" {
		t.Errorf("error %v is not a decode StageError", r.Err)
	}
}

func TestRunOnErrorFail(t *testing.T) {
	base := runtime.NumGoroutine()
	in := badAmongGood(t, 200, 10)
	sink := Collect()
	var report bytes.Buffer
	sum, err := Run(context.Background(), compileWith(t, Builtin, "decode | grayscale"), Inputs(in...), sink,
		Options{Workers: 4, StopOnError: true, Report: &report})
	if !errors.Is(err, ErrStopped) || !strings.Contains(err.Error(), "10.png: decode: ") {
		t.Fatalf("err = %v", err)
	}
	if sum.Failed != 1 || !sum.Stopped || sum.Total() > 10+1+8 || sum.Total() < 11 {
		t.Errorf("summary %+v: the run should stop within a window of the failure", sum)
	}
	for i, r := range sink.Results {
		if i <= 10 && r.Index != i {
			t.Fatalf("result %d is input %d: every input up to the failure must be reported", i, r.Index)
		}
		if i > 0 && r.Index <= sink.Results[i-1].Index {
			t.Fatalf("results out of order at %d", i)
		}
	}
	if !strings.Contains(report.String(), `"stopped":true`) {
		t.Error("summary line does not say stopped")
	}
	checkNoLeaks(t, base)
}

func TestRunInputFailures(t *testing.T) {
	dir := t.TempDir()
	rng := rand.New(rand.NewSource(6))
	good := stagestest.Encode(t, stagestest.ReadImage(rng, 20, 10, 3), "png")
	big := stagestest.Encode(t, stagestest.ReadImage(rng, 200, 100, 3), "png")
	fifo := dir + "/fifo.png"
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	huge := dir + "/huge.png"
	if err := os.WriteFile(huge, nil, 0o644); err != nil || os.Truncate(huge, 32<<20) != nil {
		t.Fatal(err)
	}
	// Files refused from their first bytes: junk, and a PNG whose header claims 60000×60000
	// followed by megabytes of data.
	junk := dir + "/junk.jpg"
	if err := os.WriteFile(junk, bytes.Repeat([]byte("junk"), 1<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	liar := dir + "/liar.png"
	hdr := stagestest.Encode(t, stagestest.ReadImage(rng, 1, 1, 1), "png")
	copy(hdr[16:24], []byte{0, 0, 0xEA, 0x60, 0, 0, 0xEA, 0x60})
	binary.BigEndian.PutUint32(hdr[29:], crc32.ChecksumIEEE(hdr[12:29]))
	if err := os.WriteFile(liar, append(hdr, make([]byte, 4<<20)...), 0o644); err != nil {
		t.Fatal(err)
	}
	padded := dir + "/padded.png"
	if err := os.WriteFile(padded, stagestest.Encode(t, stagestest.ReadImage(rng, 1, 1, 3), "png"), 0o644); err != nil || os.Truncate(padded, 20<<20) != nil {
		t.Fatal("padded file")
	}
	boomImg := stagestest.ReadImage(rng, 4, 4, 3)
	boomImg.Pix[0] = 0xEE
	reg := testStages(t)
	tests := []struct {
		name string
		spec string
		in   Input
		want string // the report's error; "" for ok
	}{
		{"good", "decode", Input{Data: good}, ""},
		{"empty", "decode", Input{Data: []byte{}}, "decode: empty file"},
		{"not an image", "decode", Input{Data: []byte("hello, world")}, "decode: unknown image format"},
		{"truncated", "decode", Input{Data: good[:len(good)-20]}, "decode: "},
		{"over max_pixels", "decode max_pixels=10000", Input{Data: big}, "decode: image is 200x100 (20000 pixels), over the 10000-pixel limit"},
		{"pixels over max_pixels", "decode max_pixels=10", Input{Image: stagestest.ReadImage(rng, 4, 4, 3)}, "decode: image is 4x4 (0.0 MP), over the 0.0 MP limit"},
		{"bad pixels", "decode", Input{Image: &stages.Image{W: 3, H: 3, C: 2, Stride: 6, Pix: make([]byte, 18)}}, "decode: image has 2 channels"},
		{"missing file", "decode", Input{Path: dir + "/nope.png"}, "decode: open: no such file or directory"},
		{"fifo", "decode", Input{Path: fifo}, "decode: not a regular file"},
		{"file over the size limit", "decode max_pixels=1000", Input{Path: huge}, "decode: file is 33554432 bytes, over the 16785216-byte limit"},
		{"small image padded far beyond its pixels", "decode", Input{Path: padded}, "decode: file too large for its pixels: file is 20971520 bytes, far more than a 1x1 image can take (at most 16777224); refused unread"},
		{"no source", "decode", Input{}, "decode: input has no path, data or image"},
		{"big non-image file", "decode", Input{Path: junk}, "decode: unknown image format"},
		{"big file with a huge header", "decode", Input{Path: liar}, "decode: image is 60000x60000 (3600.0 MP), over the 100.0 MP limit"},
		{"source error", "decode", Input{Err: errors.New("list: permission denied")}, "list: permission denied"},
		{"panic in a stage", "decode | boom", Input{Image: boomImg}, "boom: panic: boom"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.in.Name = "x.png"
			var report bytes.Buffer
			sum, err := Run(context.Background(), compileWith(t, reg, tt.spec), Inputs(tt.in), Collect(), Options{Workers: 1, Report: &report})
			if err != nil {
				t.Fatal(err)
			}
			var rl ReportLine
			if err := json.Unmarshal([]byte(reportLines(t, report.String())[0]), &rl); err != nil {
				t.Fatal(err)
			}
			if tt.want == "" {
				if rl.Status != StatusOK || sum.OK != 1 {
					t.Errorf("line %+v", rl)
				}
				return
			}
			if rl.Status != StatusFailed || sum.Failed != 1 || !strings.HasPrefix(rl.Error, tt.want) || rl.Output != "" {
				t.Errorf("got %+v, want error %q", rl, tt.want)
			}
		})
	}
}

// errSource fails after a few inputs.
type errSource struct{ n int }

func (s *errSource) Next(ctx context.Context) (Input, error) {
	s.n++
	if s.n > 3 {
		return Input{}, errors.New("disk on fire")
	}
	return Input{Name: "a", Image: stages.NewImage(2, 2, 3)}, nil
}

type failingDone struct{ Collector }

func (f *failingDone) Done(ctx context.Context, r *Result) error {
	if r.Index == 2 {
		return errors.New("no space")
	}
	return nil
}

type failingWriter struct{ after int }

func (w *failingWriter) Write(p []byte) (int, error) {
	if w.after -= len(p); w.after < 0 {
		return 0, errors.New("write failed")
	}
	return len(p), nil
}

func TestRunFatalErrors(t *testing.T) {
	base := runtime.NumGoroutine()
	plan := compileWith(t, Builtin, "decode | grayscale")
	var report bytes.Buffer
	sum, err := Run(context.Background(), plan, &errSource{}, Collect(), Options{Workers: 2, Report: &report})
	if err == nil || err.Error() != "source: disk on fire" || sum.OK > 3 {
		t.Errorf("source error: %+v %v", sum, err)
	}
	reportLines(t, report.String())

	many := &endless{data: stagestest.Encode(t, stagestest.ReadImage(rand.New(rand.NewSource(7)), 8, 8, 3), "png")}
	sum, err = Run(context.Background(), plan, many, &failingDone{}, Options{Workers: 2})
	if err == nil || err.Error() != "sink: no space" || sum.Total() != 3 {
		t.Errorf("sink error: %+v %v", sum, err)
	}
	many = &endless{data: many.data}
	_, err = Run(context.Background(), plan, many, Collect(), Options{Workers: 2, Report: &failingWriter{after: 100 << 10}})
	if err == nil || !strings.Contains(err.Error(), "report: write failed") {
		t.Errorf("report error: %v", err)
	}
	if _, err := Run(context.Background(), &Plan{}, many, Collect(), Options{}); err == nil {
		t.Error("a plan without decode ran")
	}
	if _, err := Run(context.Background(), plan, many, Collect(), Options{Workers: -1}); err == nil {
		t.Error("negative workers accepted")
	}
	checkNoLeaks(t, base)
}

func TestReportLineFormat(t *testing.T) {
	h := new([256]uint64)
	h[3] = 7
	tests := []struct {
		r    Result
		want string
	}{
		{Result{Input: "a/b.jpg", Output: "a/b.png", Status: StatusOK, Width: 1920, Height: 1080},
			`{"input":"a/b.jpg","output":"a/b.png","status":"ok","width":1920,"height":1080}`},
		{Result{Input: "bad.jpg", Output: "bad.png", Status: StatusFailed, Err: &StageError{"decode", io.ErrUnexpectedEOF}},
			`{"input":"bad.jpg","status":"failed","error":"decode: unexpected EOF"}`},
		{Result{Input: "c.png", Output: "c.png", Status: StatusSkipped, Width: 2, Height: 3, Histogram: h},
			`{"input":"c.png","output":"c.png","status":"skipped","width":2,"height":3,"histogram":[0,0,0,7` + strings.Repeat(",0", 252) + `]}`},
	}
	for _, tt := range tests {
		b, err := json.Marshal(tt.r.Line())
		if err != nil || string(b) != tt.want {
			t.Errorf("got  %s\nwant %s", b, tt.want)
		}
	}
}

func TestScratchReusesBuffers(t *testing.T) {
	var s scratch
	a := s.get(10, 10, 3)
	s.put(a)
	b := s.get(5, 5, 1)
	if &b.Pix[0] != &a.Pix[0] || len(b.Pix) != 25 || b.Stride != 5 {
		t.Error("buffer not reused")
	}
	for i := 0; i < 10; i++ {
		s.put(s.get(i+1, 1, 1))
		s.put(stages.NewImage(i+1, 1, 1))
	}
	if len(s.free) > scratchKeep {
		t.Errorf("%d buffers kept", len(s.free))
	}
	c := s.get(100, 100, 3)
	if len(c.Pix) != 30000 {
		t.Errorf("len %d", len(c.Pix))
	}
}

// Run is safe to call from several goroutines with one plan.
func TestRunConcurrentRuns(t *testing.T) {
	plan := compileWith(t, Builtin, "decode | blur sigma=1 | histogram")
	rng := rand.New(rand.NewSource(8))
	data := stagestest.Encode(t, stagestest.ReadImage(rng, 30, 20, 3), "png")
	var wg sync.WaitGroup
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			in := make([]Input, 20)
			for j := range in {
				in[j] = Input{Name: fmt.Sprint(j), Data: data}
			}
			sum, err := Run(context.Background(), plan, Inputs(in...), Collect(), Options{Workers: 2})
			if err != nil || sum.OK != 20 {
				t.Errorf("%+v %v", sum, err)
			}
		}()
	}
	wg.Wait()
}
