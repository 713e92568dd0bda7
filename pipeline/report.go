package pipeline

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
	"math"
	"time"
	"unicode/utf8"

	"github.com/imgpipe/imgpipe/cudastage/sched"
)

// Status is what became of an input.
type Status string

const (
	// StatusOK means the input went through the whole chain.
	StatusOK Status = "ok"
	// StatusFailed means a stage failed on the input; Result.Err says which and why.
	StatusFailed Status = "failed"
	// StatusSkipped means an earlier run did the input (Resume).
	StatusSkipped Status = "skipped"
)

// ReportLine is one input's line of the JSON Lines report, in the format of
// README.md#report-and-exit-codes:
//
//	{"input":"a/b.jpg","output":"a/b.png","status":"ok","width":1920,"height":1080,"histogram":[...]}
//	{"input":"bad.jpg","status":"failed","error":"decode: unexpected EOF"}
//
// Lines of inputs that were done (ok, skipped) also record what --resume checks before it
// skips one again: the chain (Pipeline, canonical) and the input file's size and
// modification time. A name that is not valid UTF-8 cannot travel in JSON as is (it would
// read back with U+FFFD in place of its odd bytes, and two names could collapse into one):
// then InputRaw (OutputRaw) holds its exact bytes in standard base64 beside the display
// name, and readers use those.
type ReportLine struct {
	Input     string `json:"input"`
	InputRaw  []byte `json:"input_base64,omitempty"`
	Output    string `json:"output,omitempty"`
	OutputRaw []byte `json:"output_base64,omitempty"`
	Status    Status `json:"status"`
	Width     int    `json:"width,omitempty"`
	Height    int    `json:"height,omitempty"`
	Decoder   string `json:"decoder,omitempty"`
	// DecodeScale is the JPEG DCT scale of decode scale=... ("1/2", "1/4", "1/8"); absent
	// at full size.
	DecodeScale string   `json:"decode_scale,omitempty"`
	Encoder     string   `json:"encoder,omitempty"`
	Histogram   []uint64 `json:"histogram,omitempty"`
	// Shape is a loaded array's shape (absent for images; [] for a 0-d array).
	Shape *[]int `json:"shape,omitempty"`
	// Reductions holds the values of an array chain's reducing stages by stage name
	// ({"sum": 1.5, "min": "NaN"}); see ReportFloat for NaN and Inf.
	Reductions map[string]ReportFloat `json:"reductions,omitempty"`
	Error      string                 `json:"error,omitempty"`
	Pipeline   string                 `json:"pipeline,omitempty"`
	Size       int64                  `json:"size,omitempty"`
	// ModTime is the input file's modification time in nanoseconds since 1970 (UTC).
	ModTime int64 `json:"mtime_ns,omitempty"`
}

// name returns the exact input name of a line read back.
func (l *ReportLine) name() string {
	if l.InputRaw != nil {
		return string(l.InputRaw)
	}
	return l.Input
}

// output returns the exact output name of a line read back.
func (l *ReportLine) output() string {
	if l.OutputRaw != nil {
		return string(l.OutputRaw)
	}
	return l.Output
}

// Summary sums up a run; it is the report's last line, {"summary":{...}}.
type Summary struct {
	OK      int `json:"ok"`
	Failed  int `json:"failed"`
	Skipped int `json:"skipped"`
	// Seconds is the run's wall time.
	Seconds float64 `json:"seconds"`
	// Megapixels counts the decoded pixels of the inputs processed in this run (ok ones).
	Megapixels float64 `json:"megapixels"`
	// MegapixelsPerSecond is Megapixels over Seconds.
	MegapixelsPerSecond float64 `json:"megapixels_per_second"`
	// Device is where pixel stages ran: "cpu", or the GPU's name.
	Device string `json:"device"`
	// Workers is the number of CPU workers (on a GPU: decode workers, and as many save
	// workers).
	Workers int `json:"workers"`
	// Streams and Batch are the GPU settings; absent on the CPU.
	Streams int `json:"streams,omitempty"`
	Batch   int `json:"batch,omitempty"`
	// Batches is the number of batches the GPU ran.
	Batches int64 `json:"batches,omitempty"`
	// H2DSeconds, KernelSeconds and D2HSeconds are the GPU's per-phase totals, timed by
	// device events: ΣH2D, Σkernels and ΣD2H over the batches.
	H2DSeconds    float64 `json:"h2d_s,omitempty"`
	KernelSeconds float64 `json:"kernels_s,omitempty"`
	D2HSeconds    float64 `json:"d2h_s,omitempty"`
	// DeviceWallSeconds is the device timeline from the first batch's H2D start to the
	// last batch's D2H end.
	DeviceWallSeconds float64 `json:"device_wall_s,omitempty"`
	// Overlap is the overlap efficiency, device wall ÷ max(ΣH2D, Σkernels, ΣD2H): 1.0 when
	// the busiest engine never waited, up to about 3 when nothing overlapped.
	Overlap float64 `json:"overlap_efficiency,omitempty"`
	// PinnedReservedBytes is the page-locked memory the GPU run held (its slots' host
	// buffers), PinnedPeakBytes its high-water mark; DeviceReservedBytes and DevicePeakBytes
	// are the same for device memory (slots and scratch). PoolHits counts the buffers the
	// pools served from their caches rather than allocating (0 for a run's own pools, which
	// allocate every slot once).
	PinnedReservedBytes int64  `json:"pinned_reserved_bytes,omitempty"`
	PinnedPeakBytes     int64  `json:"pinned_peak_bytes,omitempty"`
	DeviceReservedBytes int64  `json:"device_reserved_bytes,omitempty"`
	DevicePeakBytes     int64  `json:"device_peak_bytes,omitempty"`
	PoolHits            uint64 `json:"pool_hits,omitempty"`
	// GPUs are each device's figures when the run used several (gpu.Options.Devices). The
	// fields above are then their totals: batches, phase times and memory summed, the
	// longest device wall, and the overlap of all (Σ device walls ÷ Σ each one's busiest
	// phase); Device names them all.
	GPUs []GPUSummary `json:"gpus,omitempty"`
	// CPUFallback counts the images of a GPU run that ran on the CPU path instead (too
	// large for a slot); their results are the same bits.
	CPUFallback int `json:"cpu_fallback,omitempty"`
	// CPUStart counts the inputs of a GPU run that ran wholly on the CPU while its devices
	// opened (see package pipeline/gpu); their results are the same bits.
	CPUStart int `json:"cpu_start,omitempty"`
	// SetAside counts the inputs of a GPU run that were set aside for its devices while
	// they opened, because the device decodes them whole; the CPU took those it would
	// otherwise have waited for (they count in CPUStart too).
	SetAside int `json:"set_aside,omitempty"`
	// GPUNotStarted is set when a run that could choose (gpu.Options.Optional and Inputs)
	// left its GPUs unstarted: the CPU finished it sooner than they would have opened.
	// Device is "cpu" then. Merged reports set it when one of theirs does.
	GPUNotStarted bool `json:"gpu_not_started,omitempty"`
	// Phases are the time totals per phase (read, decode, chain, encode, write), summed
	// over the inputs: see PhaseSeconds.
	Phases PhaseSeconds `json:"phases_s"`
	// Pipeline is the canonical spec of the chain.
	Pipeline string `json:"pipeline"`
	// Interrupted is set when the run was cancelled (SIGINT) before all inputs were done.
	Interrupted bool `json:"interrupted,omitempty"`
	// Stopped is set when on_error=fail stopped the run at a failed input.
	Stopped bool `json:"stopped,omitempty"`
}

// Total is the number of inputs reported.
func (s Summary) Total() int { return s.OK + s.Failed + s.Skipped }

// Final is the summary as a report's summary line holds it: its megapixels per second
// worked out from Megapixels and Seconds where the summary was merged, not timed (a queue
// job's).
func (s Summary) Final() Summary {
	if s.MegapixelsPerSecond == 0 {
		s.finish(s.Seconds)
	}
	return s
}

func (s *Summary) finish(seconds float64) {
	s.Seconds = round3(seconds)
	s.Megapixels = round3(s.Megapixels)
	if seconds > 0 {
		s.MegapixelsPerSecond = round3(s.Megapixels / seconds)
	}
}

func round3(f float64) float64 { return math.Round(f*1000) / 1000 }

// round6 keeps microseconds, for device times of short runs.
func round6(f float64) float64 { return math.Round(f*1e6) / 1e6 }

// Line turns a result into its report line.
func (r *Result) Line() ReportLine {
	l := ReportLine{Input: r.Input, Status: r.Status, Width: r.Width, Height: r.Height, Decoder: r.Decoder, DecodeScale: r.DecodeScale}
	if !utf8.ValidString(r.Input) {
		l.InputRaw = []byte(r.Input)
	}
	if r.Status != StatusFailed {
		l.Output, l.Encoder = r.Output, r.Encoder
		if !utf8.ValidString(r.Output) {
			l.OutputRaw = []byte(r.Output)
		}
		l.Size = r.Size
		if !r.ModTime.IsZero() {
			l.ModTime = r.ModTime.UnixNano()
		}
	}
	if r.Histogram != nil {
		l.Histogram = r.Histogram[:]
	}
	if r.Shape != nil {
		shape := append([]int{}, r.Shape...)
		l.Shape = &shape
	}
	if len(r.Reductions) > 0 {
		l.Reductions = map[string]ReportFloat{}
		for _, red := range r.Reductions {
			l.Reductions[red.Stage] = ReportFloat(red.Value)
		}
	}
	if r.Err != nil {
		l.Error = r.Err.Error()
	}
	return l
}

// ReportSyncInterval is how often at most a report written to a file is synced to disk as
// the run goes. Every line is handed to the operating system as its input finishes, so a
// killed process (SIGKILL, the OOM killer) loses no finished input's line; the sync bounds
// what a power cut or a crash of the machine can lose to about this much work.
const ReportSyncInterval = time.Second

// reportWriter writes report lines as JSON Lines: each line is written through as soon as
// its input is reported (a journal), and the file, if the writer is one, is synced at most
// every ReportSyncInterval and at the summary.
type reportWriter struct {
	w        *bufio.Writer
	syncer   interface{ Sync() error } // nil when the writer cannot sync
	lastSync time.Time
	chain    string // the plan's canonical spec, recorded in the lines of inputs done
	err      error
}

func newReportWriter(w io.Writer, chain string) *reportWriter {
	if w == nil {
		return nil
	}
	rw := &reportWriter{w: bufio.NewWriterSize(w, 64<<10), chain: chain, lastSync: time.Now()}
	if s, ok := w.(interface{ Sync() error }); ok {
		rw.syncer = s
	}
	return rw
}

func (rw *reportWriter) write(v any) {
	if rw == nil || rw.err != nil {
		return
	}
	b, err := json.Marshal(v)
	if err == nil {
		b = append(b, '\n')
		_, err = rw.w.Write(b)
	}
	if err == nil {
		err = rw.w.Flush()
	}
	rw.err = err
}

func (rw *reportWriter) line(r *Result) {
	if rw == nil {
		return
	}
	l := r.Line()
	if l.Status != StatusFailed {
		l.Pipeline = rw.chain
	}
	rw.write(l)
	if rw.err == nil && rw.syncer != nil && time.Since(rw.lastSync) >= ReportSyncInterval {
		rw.sync()
	}
}

func (rw *reportWriter) sync() {
	if rw.syncer != nil && rw.err == nil {
		rw.err = rw.syncer.Sync()
		rw.lastSync = time.Now()
	}
}

func (rw *reportWriter) summary(s Summary) error {
	if rw == nil {
		return nil
	}
	rw.write(struct {
		Summary Summary `json:"summary"`
	}{s})
	rw.sync()
	return rw.err
}

// maxReportLine bounds one line of a report being read back: a line with a histogram is a
// few kilobytes.
const maxReportLine = 1 << 20

// reportReader reads the input lines of a report in order, skipping the summary and any
// line that does not parse (a report from an older version, a hand edit).
type reportReader struct {
	sc *bufio.Scanner
}

func newReportReader(r io.Reader) *reportReader {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), maxReportLine)
	return &reportReader{sc: sc}
}

// next returns the next input line, or io.EOF.
func (rr *reportReader) next() (*ReportLine, error) {
	for rr.sc.Scan() {
		var l ReportLine
		if json.Unmarshal(rr.sc.Bytes(), &l) != nil || l.name() == "" {
			continue
		}
		return &l, nil
	}
	if err := rr.sc.Err(); err != nil && !errors.Is(err, bufio.ErrTooLong) {
		return nil, err
	}
	return nil, io.EOF
}

// GPUSummary is one device's share of a run over several (gpu.Options.Devices),
// in Summary.GPUs.
type GPUSummary struct {
	// Device is the device's name, with its ordinal for a GPU: "GPU 2 (NVIDIA H200)".
	Device string `json:"device"`
	// Batches and Images are what the device ran.
	Batches int64 `json:"batches"`
	Images  int64 `json:"images"`
	// H2DSeconds, KernelSeconds, D2HSeconds, DeviceWallSeconds and Overlap are the
	// device's own figures, as Summary's fields of those names are on one device.
	H2DSeconds        float64 `json:"h2d_s"`
	KernelSeconds     float64 `json:"kernels_s"`
	D2HSeconds        float64 `json:"d2h_s"`
	DeviceWallSeconds float64 `json:"device_wall_s"`
	Overlap           float64 `json:"overlap_efficiency"`
}

// AddDeviceStats puts the figures of a run's executors, one per device, into the summary:
// their totals, and with several devices each one's figures into GPUs.
func (s *Summary) AddDeviceStats(sts []sched.Stats) {
	var h2d, kernels, d2h, wall, walls, busiest float64
	for _, st := range sts {
		s.Batches += st.Batches
		h2d += st.H2D.Seconds()
		kernels += st.Kernels.Seconds()
		d2h += st.D2H.Seconds()
		wall = max(wall, st.Wall.Seconds())
		walls += st.Wall.Seconds()
		busiest += st.Busiest().Seconds()
		s.PinnedReservedBytes += st.HostPool.Reserved
		s.PinnedPeakBytes += st.HostPool.Peak
		s.DeviceReservedBytes += int64(st.DevicePool.Reserved)
		s.DevicePeakBytes += int64(st.DevicePool.PeakReserved)
		s.PoolHits += st.PoolHits()
		if len(sts) > 1 {
			s.GPUs = append(s.GPUs, GPUSummary{Device: st.Device, Batches: st.Batches, Images: st.Images,
				H2DSeconds: round6(st.H2D.Seconds()), KernelSeconds: round6(st.Kernels.Seconds()), D2HSeconds: round6(st.D2H.Seconds()),
				DeviceWallSeconds: round6(st.Wall.Seconds()), Overlap: round3(st.Overlap())})
		}
	}
	s.H2DSeconds, s.KernelSeconds, s.D2HSeconds = round6(h2d), round6(kernels), round6(d2h)
	s.DeviceWallSeconds = round6(wall)
	if busiest > 0 {
		s.Overlap = round3(walls / busiest)
	}
}
