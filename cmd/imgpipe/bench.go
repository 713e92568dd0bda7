package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/imgpipe/imgpipe/cudastage"
	"github.com/imgpipe/imgpipe/cudastage/sched"
	"github.com/imgpipe/imgpipe/pipeline"
)

// The default chain is the target chain of the project: the one the peers in bench/peers run.
const benchDefaultSigma = 1.5

func benchDefaultChain(sigma float64) string {
	return "grayscale | blur sigma=" + strconv.FormatFloat(sigma, 'g', -1, 64) + " | transpose | histogram"
}

// Limits checked before anything is allocated. The frame limit matches decode's default
// max_pixels and the peers' (bench/peers/common.py).
const (
	benchMaxFramePixels = 100_000_000
	benchMaxFrames      = 1 << 24
	benchMaxRepeats     = 1000
	benchMaxPoolMB      = 1 << 20
	benchCopyReps       = 7
)

// benchCopyLimitBytes is the buffer MeasureCopy times to find the copy limit: large enough
// for the copy engine's peak (a variable so that tests on a fake device stay fast).
var benchCopyLimitBytes = 128 << 20

// benchFlags are the options every bench mode shares (persistent flags of `imgpipe bench`).
type benchFlags struct {
	device          string
	gpu             int
	streams, batch  string // lists: "2" or "1,2,4,8"
	chain           string
	sigma           float64
	size            string
	frames          int
	warmup, repeats int
	trace           string
	json            bool
}

// benchSettings are benchFlags checked and parsed.
type benchSettings struct {
	device          string // auto, cpu or cuda
	gpu             int    // the GPU's ordinal
	streams, batch  []int
	chain           *benchChain
	w, h            int
	frames          int
	warmup, repeats int
	trace           string
	json            bool
}

// benchOpenDevice opens GPU ordinal (--gpu) for bench runs (as 'imgpipe run' does),
// returning it and the function that closes it. Tests replace it with a sched.FakeDevice.
var benchOpenDevice = func(ordinal int) (sched.Device, func() error, error) { return openDevice(ordinal) }

func newBenchCmd(stdout, stderr io.Writer) *cobra.Command {
	var f benchFlags
	cmd := &cobra.Command{
		Use:   "bench raw|files DIR|copy [flags]",
		Short: "Measure throughput: the engine on raw frames, a folder end to end, copy bandwidth",
		Long: `Measure how fast imgpipe runs a chain of pixel stages, and how close it comes to the
machine's limit. Three modes:

  raw        the engine alone: random RGB frames (or --frames-file) already in page-locked
             memory go through the same multi-stream executor as 'imgpipe run --device cuda',
             with no decode or save. It first measures the GPU's own page-locked H2D and D2H
             bandwidth; each input pixel costs 3 bytes of H2D, so the copy limit in MP/s is
             H2D bytes/s ÷ 3, and each result says which fraction of it was reached.
  files DIR  end to end over a folder: decode, the chain, and save as PNG (into a temporary
             folder, or --out), through the same runner as 'imgpipe run'.
  copy       page-locked and pageable H2D/D2H bandwidth at a few sizes, and a profile of one
             batch of the chain: allocation, H2D, each kernel and D2H.

Every timing is the median of --repeats timed runs after --warmup untimed ones. GPU phases
are timed with CUDA events; throughput is input frames (and megapixels) per second of host
wall time, from the first frame handed to the executor to the last result back.

--streams and --batch take a list ("1,2,4,8"): every combination is measured, one result
per configuration. With --json each result is one JSON line in the schema of
bench/peers/common.py (system "imgpipe"; "imgpipe-pageable" for --pageable runs and
"imgpipe-cpu" for CPU runs), which bench/plot/plot.py reads.

--device auto uses the GPU when one works and otherwise says so and runs on the CPU (all
cores); --device cuda fails when no GPU works; 'copy' needs a GPU. --gpu N picks the GPU
(default 0, numbered as 'imgpipe devices' lists them); one the driver does not see is an
error in every mode.`,
		Example: `  # The headline: 1080p frames, 2 streams, batch 16, with a timeline:
  imgpipe bench raw --device cuda --streams 2 --batch 16 --trace trace.json

  # Sweep streams and batch sizes, one JSON line per configuration:
  imgpipe bench raw --streams 1,2,4,8 --batch 4,8,16,32 --json > imgpipe.jsonl

  # The very frames the peers time (python3 bench/peers/common.py --out frames.rgb):
  imgpipe bench raw --frames-file frames.rgb --size 1920x1080

  # A folder end to end, on the GPU and on the CPU:
  imgpipe bench files photos --device cuda
  imgpipe bench files photos --device cpu

  # Copy bandwidth and a one-batch profile:
  imgpipe bench copy --batch 16`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return usageError("bench needs a mode: raw, files DIR or copy (see 'imgpipe bench --help')")
		},
	}
	pf := cmd.PersistentFlags()
	pf.StringVar(&f.device, "device", "auto", "auto, cpu or cuda")
	pf.IntVar(&f.gpu, "gpu", 0, "which GPU to use, counting from 0 (see 'imgpipe devices')")
	pf.StringVar(&f.streams, "streams", "2", "CUDA streams, or a list to sweep: 1,2,4,8")
	pf.StringVar(&f.batch, "batch", "16", "images per GPU batch, or a list to sweep: 4,8,16,32")
	pf.StringVar(&f.chain, "chain", "", "pixel stages to run (default \""+benchDefaultChain(benchDefaultSigma)+"\")")
	pf.Float64Var(&f.sigma, "sigma", benchDefaultSigma, "blur sigma of the default chain")
	pf.StringVar(&f.size, "size", "1920x1080", "raw frame size WxH")
	pf.IntVar(&f.frames, "frames", 1024, "frames per timed run (raw); files: only the first N files when given (0: all)")
	pf.IntVar(&f.warmup, "warmup", 1, "untimed runs before timing")
	pf.IntVar(&f.repeats, "repeats", 5, "timed runs; the median is reported")
	pf.StringVar(&f.trace, "trace", "", "write a Chrome trace-event timeline of the last timed run (one configuration only)")
	pf.BoolVar(&f.json, "json", false, "one JSON line per configuration on stdout (peers' schema)")
	cmd.AddCommand(newBenchRawCmd(&f, stdout, stderr), newBenchFilesCmd(&f, stdout, stderr), newBenchCopyCmd(&f, stdout, stderr))
	return cmd
}

// settings checks the shared flags. Every error is a usage error naming the flag.
func (f *benchFlags) settings(cmd *cobra.Command, stderr io.Writer) (*benchSettings, error) {
	s := &benchSettings{device: f.device, gpu: f.gpu, frames: f.frames, warmup: f.warmup, repeats: f.repeats, trace: f.trace, json: f.json}
	var errs []error
	switch f.device {
	case "auto", "cpu", "cuda":
	default:
		errs = append(errs, fmt.Errorf("--device %q: want auto, cpu or cuda", f.device))
	}
	// The same check as run's --gpu and a job's execution.gpu.
	if err := new(pipeline.Execution).Set("gpu", f.gpu); err != nil {
		errs = append(errs, fmt.Errorf("--gpu: %w", err))
	}
	var err error
	if s.streams, err = parseIntList(f.streams, 1, sched.MaxStreams); err != nil {
		errs = append(errs, fmt.Errorf("--streams: %w", err))
	}
	if s.batch, err = parseIntList(f.batch, 1, sched.MaxBatch); err != nil {
		errs = append(errs, fmt.Errorf("--batch: %w", err))
	}
	if s.w, s.h, err = parseFrameSize(f.size); err != nil {
		errs = append(errs, fmt.Errorf("--size: %w", err))
	}
	if f.frames < 0 || f.frames > benchMaxFrames {
		errs = append(errs, fmt.Errorf("--frames %d out of range [0, %d]", f.frames, benchMaxFrames))
	}
	if f.warmup < 0 || f.warmup > benchMaxRepeats {
		errs = append(errs, fmt.Errorf("--warmup %d out of range [0, %d]", f.warmup, benchMaxRepeats))
	}
	if f.repeats < 1 || f.repeats > benchMaxRepeats {
		errs = append(errs, fmt.Errorf("--repeats %d out of range [1, %d]", f.repeats, benchMaxRepeats))
	}
	sigmaSet := cmd.Flags().Changed("sigma")
	if sigmaSet && (!(f.sigma > 0) || f.sigma > 32) {
		errs = append(errs, fmt.Errorf("--sigma %g out of range (0, 32]", f.sigma))
	}
	spec := f.chain
	switch {
	case cmd.Flags().Changed("chain") && sigmaSet:
		errs = append(errs, errors.New("--sigma sets the default chain's blur; with --chain, write blur sigma=S in the chain"))
	case !cmd.Flags().Changed("chain"):
		spec = benchDefaultChain(f.sigma)
	}
	if len(errs) > 0 {
		return nil, &exitError{code: exitUsage, err: pipeline.ErrorList(errs)}
	}
	if s.trace != "" && len(s.streams)*len(s.batch) > 1 {
		return nil, usageError("--trace records one configuration; give one --streams and one --batch value")
	}
	if s.chain, err = parseBenchChain(spec); err != nil {
		printSpecErrors(stderr, spec, err)
		return nil, reported{code: exitUsage}
	}
	return s, nil
}

// parseIntList parses "4" or "1,2,4,8" into distinct values in [lo, hi], in the order given.
func parseIntList(s string, lo, hi int) ([]int, error) {
	if strings.TrimSpace(s) == "" {
		return nil, errors.New("empty list")
	}
	var out []int
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		n, err := strconv.Atoi(part)
		if err != nil {
			return nil, fmt.Errorf("%q is not a whole number", part)
		}
		if n < lo || n > hi {
			return nil, fmt.Errorf("%d out of range [%d, %d]", n, lo, hi)
		}
		if slices.Contains(out, n) {
			return nil, fmt.Errorf("%d is listed twice", n)
		}
		out = append(out, n)
	}
	return out, nil
}

// parseFrameSize parses WxH, refusing non-positive sides and frames over the pixel limit.
func parseFrameSize(s string) (w, h int, err error) {
	a, b, ok := strings.Cut(strings.ToLower(strings.TrimSpace(s)), "x")
	if ok {
		w, err = strconv.Atoi(a)
		if err == nil {
			h, err = strconv.Atoi(b)
		}
	}
	if !ok || err != nil {
		return 0, 0, fmt.Errorf("%q: want WxH, like 1920x1080", s)
	}
	if w < 1 || h < 1 {
		return 0, 0, fmt.Errorf("%q: width and height must be positive", s)
	}
	if int64(w)*int64(h) > benchMaxFramePixels {
		return 0, 0, fmt.Errorf("%q: %d pixels, over the limit of %d", s, int64(w)*int64(h), benchMaxFramePixels)
	}
	return w, h, nil
}

// benchChain is a chain of pixel stages, as device ops and as its CPU implementation.
type benchChain struct {
	spec  string         // canonical spec, e.g. "grayscale | blur sigma=1.5 | transpose | histogram"
	label string         // the peers' short form, e.g. "gray|blur1.5|transpose|hist"
	ops   []sched.Op     // the device segment
	plan  *pipeline.Plan // "decode | spec": its Pixels are the CPU implementation
	steps []pipeline.Step
}

// parseBenchChain parses a spec of pixel stages that all run on a GPU. Errors keep the
// spec's column positions.
func parseBenchChain(spec string) (*benchChain, error) {
	steps, err := pipeline.ParseSpec(spec)
	if err != nil {
		return nil, err
	}
	ops, err := pipeline.DeviceOps(steps)
	if err != nil {
		return nil, err
	}
	dec, err := pipeline.ParseSpec("decode")
	if err != nil {
		return nil, err
	}
	plan, err := pipeline.Compile(append(dec, steps...))
	if err != nil {
		return nil, err
	}
	c := &benchChain{spec: pipeline.FormatSpec(steps), ops: ops, plan: plan, steps: steps}
	// The label is the chain in the peers' compact form (bench/peers/common.py CHAIN): each
	// stage's name followed by its parameter values, "grayscale|blur1.5|transpose|histogram".
	var parts []string
	for _, op := range ops {
		f := strings.Fields(op.String())
		for _, kv := range f[1:] {
			_, v, _ := strings.Cut(kv, "=")
			f[0] += v
		}
		parts = append(parts, f[0])
	}
	c.label = strings.Join(parts, "|")
	return c, nil
}

// benchTarget is where a bench runs: a GPU, or the CPU when dev is nil.
type benchTarget struct {
	dev   sched.Device
	close func() error
	why   string // why the CPU is used under --device auto
}

// openBenchTarget resolves --device: cuda must open GPU ordinal (exit 3 saying why
// otherwise), auto falls back to the CPU saying so once on stderr, cpu never touches the
// driver. As in 'imgpipe run', an ordinal the driver does not have fails under auto too.
func openBenchTarget(device string, ordinal int, stderr io.Writer) (*benchTarget, error) {
	if device == "cpu" {
		return &benchTarget{}, nil
	}
	dev, closeFn, err := benchOpenDevice(ordinal)
	if errors.Is(err, cudastage.ErrNoSuchGPU) {
		return nil, noSuchGPU(err)
	}
	if err != nil {
		if device == "cuda" {
			return nil, fatalError("--device cuda: no usable GPU: %s", reason(err))
		}
		fmt.Fprintf(stderr, "imgpipe: no usable GPU (%s); running on the CPU\n", reason(err))
		return &benchTarget{why: reason(err)}, nil
	}
	return &benchTarget{dev: dev, close: closeFn}, nil
}

func (t *benchTarget) Close() error {
	if t.close == nil {
		return nil
	}
	return t.close()
}

// benchRecord is one configuration's result in the peers' record schema
// (bench/peers/common.py, bench/README.md), plus imgpipe's own fields.
type benchRecord struct {
	System   string    `json:"system"`
	Mode     string    `json:"mode"`
	Device   string    `json:"device"`
	Chain    string    `json:"chain"`
	Width    *int      `json:"width"` // null in files mode
	Height   *int      `json:"height"`
	Frames   int       `json:"frames"`
	Batch    int       `json:"batch"`
	Streams  int       `json:"streams"`
	MedianS  float64   `json:"median_s"`
	RunsS    []float64 `json:"runs_s"`
	ImgPerS  float64   `json:"img_per_s"`
	MpixPerS float64   `json:"mpix_per_s"`
	Exact    bool      `json:"exact"`
	Note     string    `json:"note"`

	Threads    int      `json:"threads,omitempty"`    // CPU runs: worker goroutines
	Megapixels *float64 `json:"megapixels,omitempty"` // files mode: decoded pixels per run
	Failed     int      `json:"failed,omitempty"`     // files mode: inputs that failed
	Pinned     *bool    `json:"pinned,omitempty"`     // GPU runs: page-locked host memory

	CopyLimit  *float64 `json:"copy_limit_mpix_per_s"` // null without a GPU
	Fraction   *float64 `json:"fraction_of_copy_limit"`
	H2DGBs     *float64 `json:"h2d_gb_per_s,omitempty"` // the measured page-locked bandwidth
	D2HGBs     *float64 `json:"d2h_gb_per_s,omitempty"`
	Overlap    *float64 `json:"overlap"` // wall ÷ max(ΣH2D, Σkernels, ΣD2H) on the device
	H2DS       *float64 `json:"h2d_s,omitempty"`
	KernelsS   *float64 `json:"kernels_s,omitempty"`
	D2HS       *float64 `json:"d2h_s,omitempty"`
	DevWallS   *float64 `json:"device_wall_s,omitempty"`
	OpsS       []opTime `json:"ops_s,omitempty"`
	Bottleneck string   `json:"bottleneck,omitempty"`

	CPUMpixPerS *float64 `json:"cpu_mpix_per_s,omitempty"` // the CPU chain, same run
	GPUCPURatio *float64 `json:"gpu_cpu_ratio,omitempty"`

	Imgpipe string `json:"imgpipe"`
}

// opTime is one op's total device time in a run.
type opTime struct {
	Op string  `json:"op"`
	S  float64 `json:"s"`
}

func ptr[T any](v T) *T { return &v }

// setTimes fills the record's timing fields from the runs' durations; pixels and images
// are one run's totals.
func (r *benchRecord) setTimes(runs []time.Duration, images int, pixels float64) {
	r.RunsS = make([]float64, len(runs))
	for i, d := range runs {
		r.RunsS[i] = d.Seconds()
	}
	r.MedianS = medianDuration(runs).Seconds()
	if r.MedianS > 0 {
		r.ImgPerS = float64(images) / r.MedianS
		r.MpixPerS = pixels / 1e6 / r.MedianS
	}
}

// setDevice fills the device-timed fields from the executor's stats of one run.
func (r *benchRecord) setDevice(st sched.Stats) {
	r.Overlap = ptr(st.Overlap())
	r.H2DS, r.KernelsS, r.D2HS = ptr(st.H2D.Seconds()), ptr(st.Kernels.Seconds()), ptr(st.D2H.Seconds())
	r.DevWallS = ptr(st.Wall.Seconds())
	r.Bottleneck = st.Bottleneck()
	r.OpsS = nil
	for _, o := range st.Ops {
		r.OpsS = append(r.OpsS, opTime{Op: o.Op, S: o.Total.Seconds()})
	}
}

// setLimit fills the copy-limit fields from the measured page-locked bandwidth.
func (r *benchRecord) setLimit(bw *sched.Bandwidth) {
	if bw == nil || bw.H2D <= 0 {
		return
	}
	limit := copyLimitMPix(*bw)
	r.CopyLimit = ptr(limit)
	r.Fraction = ptr(r.MpixPerS / limit)
	r.H2DGBs, r.D2HGBs = ptr(bw.H2D/1e9), ptr(bw.D2H/1e9)
}

// copyLimitMPix is the H2D-bound throughput in MP/s: every input pixel costs 3 bytes of H2D.
func copyLimitMPix(bw sched.Bandwidth) float64 { return bw.H2D / 3 / 1e6 }

func medianDuration(d []time.Duration) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	if n := len(s); n%2 == 0 {
		return (s[n/2-1] + s[n/2]) / 2
	}
	return s[len(s)/2]
}

// emitRecord writes the record as one JSON line.
func emitRecord(w io.Writer, r *benchRecord) error {
	r.Imgpipe = version
	return writeJSONLine(w, r)
}

func writeJSONLine(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}

// cpuName is the CPU's model and the cores Go uses, as the peers write it.
func cpuName() string {
	name := "CPU"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				name = strings.TrimSpace(v)
				break
			}
		}
	}
	return fmt.Sprintf("%s (%d cores)", name, runtime.GOMAXPROCS(0))
}

// fmtRate writes a figure with no more digits than it deserves.
func fmtRate(v float64) string {
	switch {
	case math.IsNaN(v) || math.IsInf(v, 0):
		return "-"
	case v >= 100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case v >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	}
	return strconv.FormatFloat(v, 'f', 2, 64)
}

func fmtMs(d time.Duration) string { return fmt.Sprintf("%.2f", float64(d)/float64(time.Millisecond)) }
