package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"image"
	"image/color"
	"image/png"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/imgpipe/imgpipe/cudastage/sched"
	"github.com/imgpipe/imgpipe/cudastage/sched/schedtest"
)

// benchCLI runs the CLI in-process with ctx and returns its exit code, stdout and stderr.
func benchCLI(t *testing.T, ctx context.Context, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(ctx, args, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

// withDevice makes the bench open dev (or fail with err) instead of a real GPU.
func withDevice(t *testing.T, dev sched.Device, err error) {
	t.Helper()
	setOpenDevice(t, func(int) (sched.Device, func() error, error) {
		if err != nil {
			return nil, nil, err
		}
		return dev, func() error { return nil }, nil
	})
	smallCopyLimit(t)
}

// smallCopyLimit measures the copy limit on 1 MiB, so that tests on a fake device stay fast.
func smallCopyLimit(t *testing.T) {
	old, oldWarm := benchCopyBytes, benchCopyWarmup
	benchCopyBytes, benchCopyWarmup = 1<<20, time.Nanosecond
	t.Cleanup(func() { benchCopyBytes, benchCopyWarmup = old, oldWarm })
}

func fakeGPU(cfg schedtest.FakeConfig) *schedtest.FakeDevice {
	if cfg.Name == "" {
		cfg.Name = "fake GPU"
	}
	if cfg.H2DRate == 0 {
		cfg.H2DRate, cfg.D2HRate = 4e9, 4e9
	}
	return schedtest.NewFake(cfg)
}

// records parses JSON Lines output into maps, failing on any line that is not JSON.
func records(t *testing.T, out string) []map[string]any {
	t.Helper()
	var recs []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if line == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("stdout line is not JSON: %v\n%s", err, line)
		}
		recs = append(recs, m)
	}
	return recs
}

// checkSchema asserts the fields bench/plot/plot.py requires and the peers' schema holds.
func checkSchema(t *testing.T, r map[string]any) {
	t.Helper()
	for _, k := range []string{"system", "mode", "device", "chain", "width", "height", "frames", "batch", "streams",
		"median_s", "runs_s", "img_per_s", "mpix_per_s", "exact", "note", "copy_limit_mpix_per_s", "fraction_of_copy_limit"} {
		if _, ok := r[k]; !ok {
			t.Errorf("record has no %q: %v", k, r)
		}
	}
	for _, k := range []string{"img_per_s", "mpix_per_s", "median_s"} {
		if v, ok := r[k].(float64); !ok || !(v > 0) {
			t.Errorf("%s = %v, want a positive number", k, r[k])
		}
	}
	runs, _ := r["runs_s"].([]any)
	if len(runs) == 0 {
		t.Errorf("runs_s = %v, want the repeats' times", r["runs_s"])
	}
	if r["chain"] != "grayscale|blur1.5|transpose|histogram" && r["chain"] != "grayscale|boxblur1" {
		t.Errorf("chain = %v", r["chain"])
	}
}

func TestBenchUsageErrors(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"bench"}, "needs a mode"},
		{[]string{"bench", "nosuch"}, "unknown command"},
		{[]string{"bench", "raw", "--device", "tpu"}, "--device"},
		{[]string{"bench", "raw", "--streams", "0"}, "--streams"},
		{[]string{"bench", "raw", "--batch", "1,x"}, "--batch"},
		{[]string{"bench", "raw", "--size", "big"}, "--size"},
		{[]string{"bench", "raw", "--repeats", "0"}, "--repeats"},
		{[]string{"bench", "raw", "--warmup", "-1"}, "--warmup"},
		{[]string{"bench", "raw", "--frames", "0", "--device", "cpu"}, "at least 1 frame"},
		{[]string{"bench", "raw", "--sigma", "40"}, "--sigma"},
		{[]string{"bench", "raw", "--sigma", "2", "--chain", "grayscale"}, "--sigma sets the default chain"},
		{[]string{"bench", "raw", "--chain", "grayscale | nosuch"}, "nosuch"},
		{[]string{"bench", "raw", "--chain", "decode | grayscale"}, "decode"},
		{[]string{"bench", "raw", "--trace", "t.json", "--streams", "1,2"}, "one configuration"},
		{[]string{"bench", "raw", "--pool", "0", "--device", "cpu"}, "--pool"},
		{[]string{"bench", "raw", "--max-pool-mb", "1", "--device", "cpu"}, "over --max-pool-mb"},
		{[]string{"bench", "raw", "--frames-file", filepath.Join(dir, "none.rgb"), "--device", "cpu"}, "--frames-file"},
		{[]string{"bench", "raw", "--nosuchflag"}, "unknown flag"},
		{[]string{"bench", "files"}, "accepts 1 arg"},
		{[]string{"bench", "files", filepath.Join(dir, "missing"), "--device", "cpu"}, "input folder"},
		{[]string{"bench", "files", dir, "--out", dir, "--device", "cpu"}, "input folder"},
		{[]string{"bench", "copy", "--device", "cpu"}, "--device cpu"},
		{[]string{"bench", "files", dir, "--pinned-mb", "-1", "--device", "cpu"}, "--pinned-mb"},
		{[]string{"bench", "raw", "--device", "cpu", "--frames", "1", "--cpuprofile", filepath.Join(dir, "no", "such", "cpu.pprof")}, "--cpuprofile"},
		{[]string{"bench", "serve"}, "accepts 1 arg"},
		{[]string{"bench", "serve", dir, "--clients", "0", "--device", "cpu"}, "--clients 0"},
		{[]string{"bench", "serve", dir, "--url", "http://a:1", "--get", "http://b:2/{name}"}, "--url and --get"},
		{[]string{"bench", "serve", dir, "--get", "http://b:2/x"}, "no {name}"},
		{[]string{"bench", "serve", dir, "--load", "0.5,2", "--device", "cpu"}, "--load 2"},
		{[]string{"bench", "serve", dir, "--load", "half"}, "--load"},
		{[]string{"bench", "serve", dir, "--streams", "1,2"}, "one configuration"},
		{[]string{"bench", "serve", dir, "--duration", "0s", "--device", "cpu"}, "--duration"},
		{[]string{"bench", "serve", dir, "--device", "cpu"}, "has no .jpg"},
		{[]string{"bench", "serve", filepath.Join(dir, "missing"), "--device", "cpu"}, "photo folder"},
		{[]string{"bench", "serve", dir, "--workers", "-1", "--device", "cpu"}, "--workers"},
	}
	for _, tt := range tests {
		code, _, stderr := benchCLI(t, context.Background(), tt.args...)
		if code != exitUsage || !strings.Contains(stderr, tt.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 mentioning %q", tt.args, code, stderr, tt.want)
		}
	}
}

func TestBenchHelpTeaches(t *testing.T) {
	for _, mode := range []string{"raw", "files", "copy", "serve"} {
		code, stdout, _ := benchCLI(t, context.Background(), "bench", mode, "--help")
		if code != 0 || !strings.Contains(stdout, "imgpipe bench "+mode) {
			t.Errorf("bench %s --help: exit %d, no example in\n%s", mode, code, stdout)
		}
	}
	_, stdout, _ := benchCLI(t, context.Background(), "bench", "--help")
	for _, want := range []string{"copy limit", "--streams", "1,2,4,8", "plot.py"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("bench --help does not mention %q", want)
		}
	}
}

func TestBenchRawCPU(t *testing.T) {
	withDevice(t, nil, errors.New("no driver here"))
	code, stdout, stderr := benchCLI(t, context.Background(), "bench", "raw", "--size", "33x17", "--frames", "20",
		"--repeats", "3", "--warmup", "0", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !strings.Contains(stderr, "no usable GPU (no driver here); running on the CPU") {
		t.Errorf("auto without a GPU does not say so:\n%s", stderr)
	}
	recs := records(t, stdout)
	if len(recs) != 1 {
		t.Fatalf("%d records, want 1 CPU record", len(recs))
	}
	r := recs[0]
	checkSchema(t, r)
	if r["system"] != "imgpipe-cpu" || r["mode"] != "raw" || r["width"] != 33.0 || r["height"] != 17.0 || r["frames"] != 20.0 {
		t.Errorf("record fields: %v", r)
	}
	if r["copy_limit_mpix_per_s"] != nil || r["fraction_of_copy_limit"] != nil {
		t.Errorf("a CPU run has no copy limit: %v", r)
	}
	if runs := r["runs_s"].([]any); len(runs) != 3 {
		t.Errorf("runs_s has %d entries, want 3", len(runs))
	}
	med, img := r["median_s"].(float64), r["img_per_s"].(float64)
	if math.Abs(img*med-20) > 1e-6 || math.Abs(r["mpix_per_s"].(float64)*med-20*33*17/1e6) > 1e-9 {
		t.Errorf("throughput does not follow from the median: %v", r)
	}

	// --device cuda without a GPU is a runtime error that says why.
	code, _, stderr = benchCLI(t, context.Background(), "bench", "raw", "--device", "cuda", "--size", "8x8", "--frames", "2")
	if code != exitFatal || !strings.Contains(stderr, "no driver here") {
		t.Errorf("--device cuda without a GPU: exit %d, %q", code, stderr)
	}
	// copy explains why it cannot run.
	code, _, stderr = benchCLI(t, context.Background(), "bench", "copy")
	if code != exitFatal || !strings.Contains(stderr, "needs a GPU") || !strings.Contains(stderr, "no driver here") {
		t.Errorf("copy without a GPU: exit %d, %q", code, stderr)
	}
}

func TestBenchRawFakeGPUSweep(t *testing.T) {
	withDevice(t, fakeGPU(schedtest.FakeConfig{}), nil)
	code, stdout, stderr := benchCLI(t, context.Background(), "bench", "raw", "--device", "cuda", "--size", "64x48",
		"--frames", "24", "--streams", "1,3", "--batch", "4,8", "--repeats", "2", "--json", "--cpu-frames", "8")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	recs := records(t, stdout)
	if len(recs) != 5 {
		t.Fatalf("%d records, want the CPU one and 4 configurations:\n%s", len(recs), stdout)
	}
	cpu := recs[0]
	if cpu["system"] != "imgpipe-cpu" || cpu["frames"] != 8.0 {
		t.Errorf("CPU record: %v", cpu)
	}
	want := [][2]float64{{1, 4}, {1, 8}, {3, 4}, {3, 8}}
	for i, r := range recs[1:] {
		checkSchema(t, r)
		if r["system"] != "imgpipe" || r["device"] != "fake GPU" || r["streams"] != want[i][0] || r["batch"] != want[i][1] {
			t.Errorf("record %d: %v", i, r)
		}
		if r["exact"] != true || !strings.Contains(r["note"].(string), "2 results compared") {
			t.Errorf("record %d not checked against the CPU: exact %v, note %v", i, r["exact"], r["note"])
		}
		limit, _ := r["copy_limit_mpix_per_s"].(float64)
		frac, _ := r["fraction_of_copy_limit"].(float64)
		if limit <= 0 || math.Abs(frac-r["mpix_per_s"].(float64)/limit) > 1e-9 {
			t.Errorf("fraction %v of limit %v for %v MP/s", frac, limit, r["mpix_per_s"])
		}
		if h2d := r["h2d_gb_per_s"].(float64); math.Abs(limit-h2d*1e9/3/1e6) > 1e-6 {
			t.Errorf("limit %v is not H2D %v GB/s ÷ 3", limit, h2d)
		}
		if ov, _ := r["overlap"].(float64); !(ov >= 0.5) {
			t.Errorf("overlap = %v", r["overlap"])
		}
		ops, _ := r["ops_s"].([]any)
		if len(ops) != 4 || ops[1].(map[string]any)["op"] != "blur sigma=1.5" {
			t.Errorf("ops_s = %v", r["ops_s"])
		}
		ratio, _ := r["gpu_cpu_ratio"].(float64)
		if math.Abs(ratio-r["mpix_per_s"].(float64)/cpu["mpix_per_s"].(float64)) > 1e-9 || r["pinned"] != true {
			t.Errorf("ratio %v, pinned %v", ratio, r["pinned"])
		}
	}
	if !strings.Contains(stderr, "copy limit") || !strings.Contains(stderr, "overlap") {
		t.Errorf("the table is missing from stderr:\n%s", stderr)
	}
}

func TestBenchRawFramesFileAndTrace(t *testing.T) {
	withDevice(t, fakeGPU(schedtest.FakeConfig{}), nil)
	dir := t.TempDir()
	frames := make([]byte, 3*20*10*3)
	rng := rand.New(rand.NewPCG(5, 6))
	for i := range frames {
		frames[i] = byte(rng.Uint32())
	}
	ff := filepath.Join(dir, "frames.rgb")
	if err := os.WriteFile(ff, frames, 0o644); err != nil {
		t.Fatal(err)
	}
	trace := filepath.Join(dir, "trace.json")
	code, stdout, stderr := benchCLI(t, context.Background(), "bench", "raw", "--device", "cuda", "--size", "20x10",
		"--frames-file", ff, "--frames", "12", "--batch", "4", "--streams", "2", "--repeats", "3", "--no-cpu",
		"--trace", trace)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !strings.Contains(stdout, "3 frames from "+ff) || !strings.Contains(stdout, "trace of the last timed run") {
		t.Errorf("output does not name the frames file or the trace:\n%s", stdout)
	}
	if strings.Contains(stdout, "CPU,") {
		t.Errorf("--no-cpu still ran the CPU:\n%s", stdout)
	}
	b, err := os.ReadFile(trace)
	if err != nil {
		t.Fatal(err)
	}
	var tf struct {
		TraceEvents []struct {
			Name string         `json:"name"`
			Ph   string         `json:"ph"`
			Tid  int            `json:"tid"`
			Args map[string]any `json:"args"`
		} `json:"traceEvents"`
	}
	if err := json.Unmarshal(b, &tf); err != nil {
		t.Fatalf("trace is not JSON: %v", err)
	}
	tracks := map[int]string{}
	count := map[string]int{}
	for _, e := range tf.TraceEvents {
		if e.Ph == "M" && e.Name == "thread_name" {
			tracks[e.Tid] = e.Args["name"].(string)
		}
		if e.Ph == "X" {
			count[e.Name]++
		}
	}
	// One timed run of 12 frames at batch 4: 3 batches, each with one H2D, 4 kernels, one D2H.
	if count["H2D"] != 3 || count["D2H"] != 3 || count["blur sigma=1.5"] != 3 {
		t.Errorf("spans %v, want 3 batches of the last run only", count)
	}
	streams := 0
	for _, name := range tracks {
		if strings.Contains(name, "stream") {
			streams++
		}
	}
	if streams != 2 {
		t.Errorf("tracks %v, want 2 stream tracks", tracks)
	}
}

func TestBenchRawPageable(t *testing.T) {
	withDevice(t, fakeGPU(schedtest.FakeConfig{PageableRate: 2e9}), nil)
	code, stdout, stderr := benchCLI(t, context.Background(), "bench", "raw", "--device", "cuda", "--size", "16x16",
		"--frames", "8", "--batch", "4", "--streams", "1", "--pageable", "--no-cpu", "--repeats", "1", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	recs := records(t, stdout)
	if len(recs) != 1 || recs[0]["system"] != "imgpipe-pageable" || recs[0]["pinned"] != false || recs[0]["exact"] != true {
		t.Errorf("records: %v", recs)
	}
}

// differentDevice corrupts one byte of every D2H, as a wrong kernel would.
type differentDevice struct{ *schedtest.FakeDevice }

func (d differentDevice) DtoH(s sched.Stream, dst []byte, src sched.DevPtr, off int) error {
	if err := d.FakeDevice.DtoH(s, dst, src, off); err != nil {
		return err
	}
	if err := d.FakeDevice.SyncStream(s); err != nil {
		return err
	}
	dst[0] ^= 0x40
	return nil
}

func TestBenchRawReportsMismatch(t *testing.T) {
	withDevice(t, differentDevice{fakeGPU(schedtest.FakeConfig{})}, nil)
	code, stdout, stderr := benchCLI(t, context.Background(), "bench", "raw", "--device", "cuda", "--size", "16x8",
		"--frames", "8", "--batch", "4", "--streams", "1", "--no-cpu", "--repeats", "1", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	recs := records(t, stdout)
	if len(recs) != 1 || recs[0]["exact"] != false || !strings.Contains(recs[0]["note"].(string), "NOT exact") {
		t.Errorf("a wrong output was not caught: %v", recs)
	}
	if !strings.Contains(stderr, "differs from the CPU chain") {
		t.Errorf("stderr does not warn:\n%s", stderr)
	}
}

func TestBenchRawDeviceFault(t *testing.T) {
	var runs atomic.Int64
	withDevice(t, fakeGPU(schedtest.FakeConfig{Fault: func(call string) error {
		if strings.HasPrefix(call, "Run ") && runs.Add(1) == 30 {
			return errors.New("illegal address (injected)")
		}
		return nil
	}}), nil)
	code, _, stderr := benchCLI(t, context.Background(), "bench", "raw", "--device", "cuda", "--size", "16x8",
		"--frames", "64", "--batch", "4", "--streams", "2", "--no-cpu", "--repeats", "3")
	if code != exitFatal || !strings.Contains(stderr, "illegal address (injected)") {
		t.Errorf("device fault: exit %d, stderr %q; want exit 3 naming the fault", code, stderr)
	}
}

func TestBenchRawInterrupted(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var runs atomic.Int64
	withDevice(t, fakeGPU(schedtest.FakeConfig{Fault: func(call string) error {
		if strings.HasPrefix(call, "Run ") && runs.Add(1) == 40 {
			cancel() // as SIGINT does, mid-run
		}
		return nil
	}}), nil)
	done := make(chan struct{})
	var code int
	var stderr string
	go func() {
		defer close(done)
		code, _, stderr = benchCLI(t, ctx, "bench", "raw", "--device", "cuda", "--size", "16x8",
			"--frames", "100000", "--batch", "4", "--streams", "2", "--no-cpu", "--repeats", "3")
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("bench raw did not end after the interrupt")
	}
	if code != exitInterrupted || !strings.Contains(stderr, "interrupted") {
		t.Errorf("interrupt: exit %d, %q; want 130", code, stderr)
	}
}

func TestBenchCopyFake(t *testing.T) {
	withDevice(t, fakeGPU(schedtest.FakeConfig{PageableRate: 1e9}), nil)
	code, stdout, stderr := benchCLI(t, context.Background(), "bench", "copy", "--size", "32x16", "--batch", "4,2",
		"--repeats", "3", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	recs := records(t, stdout)
	if len(recs) != 1 {
		t.Fatalf("%d records", len(recs))
	}
	r := recs[0]
	copies, _ := r["copies"].([]any)
	// a frame (1536 B), 2 and 4 frames, and the limit buffer (1 MiB in tests)
	if len(copies) != 4 {
		t.Fatalf("copies = %v", r["copies"])
	}
	for _, c := range copies {
		m := c.(map[string]any)
		for _, k := range []string{"pinned_h2d_gb_per_s", "pinned_d2h_gb_per_s", "pageable_h2d_gb_per_s", "pageable_d2h_gb_per_s"} {
			if v, _ := m[k].(float64); !(v > 0) {
				t.Errorf("%s = %v at %v bytes", k, m[k], m["bytes"])
			}
		}
	}
	prof, _ := r["profile"].(map[string]any)
	warm, _ := prof["warm"].(map[string]any)
	ops, _ := warm["ops_ms"].(map[string]any)
	if len(ops) != 4 || prof["h2d_bytes"].(float64) < 4*32*16*3 {
		t.Errorf("profile = %v", prof)
	}
	for _, want := range []string{"pinned H2D", "alloc", "blur sigma=1.5", "device wall", "free"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("copy table lacks %q:\n%s", want, stderr)
		}
	}
}

func benchPhotoPNG(t *testing.T, path string, w, h int, seed uint64) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 1))
	m := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			m.Set(x, y, color.RGBA{uint8(rng.Uint32()), uint8(x * 255 / w), uint8(y * 255 / h), 255})
		}
	}
	var b bytes.Buffer
	if err := png.Encode(&b, m); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestBenchFilesCPU(t *testing.T) {
	in := t.TempDir()
	benchPhotoPNG(t, filepath.Join(in, "a.png"), 31, 17, 1)
	benchPhotoPNG(t, filepath.Join(in, "sub", "b.png"), 8, 40, 2)
	benchPhotoPNG(t, filepath.Join(in, "sub", "c.png"), 25, 25, 3)
	if err := os.WriteFile(filepath.Join(in, "broken.png"), []byte("\x89PNG\r\n\x1a\nnot really"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "out")
	code, stdout, stderr := benchCLI(t, context.Background(), "bench", "files", in, "--device", "cpu", "--repeats", "2",
		"--warmup", "0", "--out", out, "--json", "--frames", "0")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	recs := records(t, stdout)
	if len(recs) != 1 {
		t.Fatalf("%d records", len(recs))
	}
	r := recs[0]
	checkSchema(t, r)
	wantMP := float64(31*17+8*40+25*25) / 1e6
	if r["mode"] != "files" || r["system"] != "imgpipe-cpu" || r["width"] != nil || r["frames"] != 3.0 || r["failed"] != 1.0 {
		t.Errorf("record: %v", r)
	}
	if mp, _ := r["megapixels"].(float64); math.Abs(mp-wantMP) > 1e-3 {
		t.Errorf("megapixels %v, want %v", mp, wantMP)
	}
	if r["exact"] != true || !strings.Contains(r["note"].(string), "2 outputs") || !strings.Contains(r["note"].(string), "1 inputs failed") {
		t.Errorf("exact %v, note %v", r["exact"], r["note"])
	}
	if _, err := os.Stat(filepath.Join(out, "sub", "c.png")); err != nil {
		t.Errorf("--out does not hold the outputs: %v", err)
	}

	// --frames 1 takes the first file only; a temporary folder is removed afterwards;
	// --cpuprofile writes a profile that pprof reads.
	prof := filepath.Join(t.TempDir(), "cpu.pprof")
	code, stdout, stderr = benchCLI(t, context.Background(), "bench", "files", in, "--device", "cpu", "--repeats", "1",
		"--frames", "1", "--json", "--cpuprofile", prof)
	if recs := records(t, stdout); code != 0 || len(recs) != 1 || recs[0]["frames"] != 1.0 {
		t.Errorf("--frames 1: exit %d, %v, %s", code, stdout, stderr)
	}
	if f, err := os.Open(prof); err != nil {
		t.Errorf("--cpuprofile: %v", err)
	} else {
		// A profile is gzipped protocol buffers.
		zr, err := gzip.NewReader(f)
		if err == nil {
			_, err = io.Copy(io.Discard, zr)
		}
		if err != nil {
			t.Errorf("--cpuprofile wrote no profile: %v", err)
		}
		f.Close()
	}

	// A folder with nothing usable is an error that says so.
	empty := t.TempDir()
	code, _, stderr = benchCLI(t, context.Background(), "bench", "files", empty, "--device", "cpu", "--repeats", "1")
	if code != exitFatal || !strings.Contains(stderr, "no image") {
		t.Errorf("empty folder: exit %d, %q", code, stderr)
	}
}

func TestBenchFilesFakeGPU(t *testing.T) {
	withDevice(t, fakeGPU(schedtest.FakeConfig{}), nil)
	in := t.TempDir()
	benchPhotoPNG(t, filepath.Join(in, "a.png"), 31, 17, 1)
	benchPhotoPNG(t, filepath.Join(in, "b", "c.png"), 40, 8, 2)
	benchPhotoPNG(t, filepath.Join(in, "b", "d.png"), 9, 9, 3)
	trace := filepath.Join(t.TempDir(), "trace.json")
	code, stdout, stderr := benchCLI(t, context.Background(), "bench", "files", in, "--device", "cuda", "--streams", "1,2",
		"--batch", "2", "--repeats", "2", "--warmup", "0", "--json", "--pinned-mb", "1")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	recs := records(t, stdout)
	if len(recs) != 2 {
		t.Fatalf("%d records, want one per stream count", len(recs))
	}
	for i, r := range recs {
		checkSchema(t, r)
		if r["system"] != "imgpipe" || r["device"] != "fake GPU" || r["streams"] != float64(i+1) || r["batch"] != 2.0 || r["frames"] != 3.0 {
			t.Errorf("record %d: %v", i, r)
		}
		if r["exact"] != true {
			t.Errorf("record %d not exact: %v", i, r["note"])
		}
		if ov, _ := r["overlap"].(float64); !(ov > 0) {
			t.Errorf("record %d has no overlap efficiency: %v", i, r)
		}
	}
	code, _, stderr = benchCLI(t, context.Background(), "bench", "files", in, "--device", "cuda", "--repeats", "1",
		"--warmup", "0", "--trace", trace, "--pinned-mb", "1")
	if code != 0 {
		t.Fatalf("--trace: exit %d: %s", code, stderr)
	}
	b, err := os.ReadFile(trace)
	if err != nil || !json.Valid(b) || !bytes.Contains(b, []byte(`"H2D"`)) {
		t.Errorf("trace of a GPU folder run: %v, %d bytes, valid %v", err, len(b), json.Valid(b))
	}
}

// TestBenchServeCPU: the flags reach bench.Serve, and --json is one object on stdout.
func TestBenchServeCPU(t *testing.T) {
	in := t.TempDir()
	benchPhotoPNG(t, filepath.Join(in, "a.png"), 40, 30, 1)
	benchPhotoPNG(t, filepath.Join(in, "sub", "b.png"), 20, 24, 2)
	code, stdout, stderr := benchCLI(t, context.Background(), "bench", "serve", in, "--device", "cpu", "--workers", "2",
		"--clients", "2", "--requests", "4", "--warm-requests", "1", "--json", "-p", "decode | resize width=8 height=8 fit=inside | save format=png")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	recs := records(t, stdout)
	sat, _ := recs[0]["saturated"].(map[string]any)
	if len(recs) != 1 || recs[0]["device"] != "cpu" || sat["ok"] != 4.0 || sat["clients"] != 2.0 {
		t.Errorf("report %v", recs)
	}
	if !strings.Contains(stderr, "saturated (2 clients): 4 of 4 requests ok") {
		t.Errorf("stderr: %s", stderr)
	}
}

// TestBenchServeFakeGPU: in-process on a GPU, the report counts the engine's device batches.
func TestBenchServeFakeGPU(t *testing.T) {
	withDevice(t, fakeGPU(schedtest.FakeConfig{}), nil)
	in := t.TempDir()
	benchPhotoPNG(t, filepath.Join(in, "a.png"), 31, 17, 1)
	benchPhotoPNG(t, filepath.Join(in, "b.png"), 20, 24, 2)
	code, stdout, stderr := benchCLI(t, context.Background(), "bench", "serve", in, "--device", "cuda", "--streams", "1",
		"--batch", "4", "--clients", "4", "--requests", "12", "--json", "-p", "decode | grayscale | save format=png")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	recs := records(t, stdout)
	sat, _ := recs[0]["saturated"].(map[string]any)
	batches, _ := sat["batches"].(map[string]any)
	if recs[0]["device"] != "fake GPU" || sat["ok"] != 12.0 || batches == nil || !(batches["count"].(float64) >= 3) {
		t.Errorf("report %v", recs[0])
	}
	if !strings.Contains(stderr, "device batches: ") {
		t.Errorf("stderr: %s", stderr)
	}
}
