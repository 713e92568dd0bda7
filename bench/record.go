package bench

import (
	"fmt"
	"math"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/imgpipe/imgpipe/cudastage/sched"
	"github.com/imgpipe/imgpipe/pipeline"
)

// Record is one configuration's result in the peers' record schema (bench/peers/common.py,
// bench/README.md), plus imgpipe's own fields. bench/plot/plot.py reads it. Throughput is
// Frames / MedianS images per second, and Frames·Width·Height / MedianS pixels.
type Record struct {
	System   string    `json:"system"`   // imgpipe, imgpipe-pageable or imgpipe-cpu
	Mode     string    `json:"mode"`     // raw or files
	Device   string    `json:"device"`   // the GPU's name, or the CPU's model and cores
	Chain    string    `json:"chain"`    // Chain.Label
	Width    *int      `json:"width"`    // frame width; null in files mode
	Height   *int      `json:"height"`   // frame height; null in files mode
	Frames   int       `json:"frames"`   // images per timed run
	Batch    int       `json:"batch"`    // images per GPU batch (0 on the CPU)
	Streams  int       `json:"streams"`  // GPU streams (0 on the CPU)
	MedianS  float64   `json:"median_s"` // the median of RunsS
	RunsS    []float64 `json:"runs_s"`   // each timed run's wall time, in seconds
	ImgPerS  float64   `json:"img_per_s"`
	MpixPerS float64   `json:"mpix_per_s"`
	Exact    bool      `json:"exact"` // measured: results compared with the CPU chain
	Note     string    `json:"note"`  // what was compared, and how the run differs, if at all

	Threads    int      `json:"threads,omitempty"`    // CPU runs: worker goroutines
	Megapixels *float64 `json:"megapixels,omitempty"` // files mode: decoded pixels per run
	Failed     int      `json:"failed,omitempty"`     // files mode: inputs that failed
	// PerImageMS is, in files mode, each phase's worker time per image in milliseconds
	// (pipeline.PhaseSeconds of the last run ÷ its images, × 1000).
	PerImageMS *pipeline.PhaseSeconds `json:"per_image_ms,omitempty"`
	Pinned     *bool                  `json:"pinned,omitempty"` // GPU runs: page-locked host memory

	// GPU runs: the copy limit in MP/s (page-locked H2D ÷ 3 bytes per pixel; null without
	// a GPU), the fraction of it reached, and the measured page-locked bandwidth in GB/s.
	CopyLimit *float64 `json:"copy_limit_mpix_per_s"`
	Fraction  *float64 `json:"fraction_of_copy_limit"`
	H2DGBs    *float64 `json:"h2d_gb_per_s,omitempty"`
	D2HGBs    *float64 `json:"d2h_gb_per_s,omitempty"`

	// GPU runs, timed by device events over the median run: the overlap efficiency
	// wall ÷ max(ΣH2D, Σkernels, ΣD2H), the per-phase sums and the device wall in seconds,
	// each op's total, and the busiest engine.
	Overlap    *float64 `json:"overlap"`
	H2DS       *float64 `json:"h2d_s,omitempty"`
	KernelsS   *float64 `json:"kernels_s,omitempty"`
	D2HS       *float64 `json:"d2h_s,omitempty"`
	DevWallS   *float64 `json:"device_wall_s,omitempty"`
	OpsS       []OpTime `json:"ops_s,omitempty"`
	Bottleneck string   `json:"bottleneck,omitempty"`

	// Raw GPU runs: the CPU chain's MP/s measured in the same run, and the ratio to it.
	CPUMpixPerS *float64 `json:"cpu_mpix_per_s,omitempty"`
	GPUCPURatio *float64 `json:"gpu_cpu_ratio,omitempty"`

	// Raw runs over several GPUs (--gpu all or a list): how many ran at once, and the
	// throughput of them together over one GPU's, measured alone in the same run.
	GPUs    int      `json:"gpus,omitempty"`
	Scaling *float64 `json:"scaling_vs_one_gpu,omitempty"`

	Imgpipe string `json:"imgpipe"` // the version that measured
}

// OpTime is one op's total device time in a run.
type OpTime struct {
	Op string  `json:"op"` // the op as a spec writes it: "blur sigma=1.5"
	S  float64 `json:"s"`  // seconds
}

func ptr[T any](v T) *T { return &v }

// setTimes fills the record's timing fields from the runs' durations; pixels and images
// are one run's totals.
func (r *Record) setTimes(runs []time.Duration, images int, pixels float64) {
	r.RunsS = make([]float64, len(runs))
	for i, d := range runs {
		r.RunsS[i] = d.Seconds()
	}
	r.MedianS = median(runs).Seconds()
	if r.MedianS > 0 {
		r.ImgPerS = float64(images) / r.MedianS
		r.MpixPerS = pixels / 1e6 / r.MedianS
	}
}

// setDevice fills the device-timed fields from the executor's stats of one run.
func (r *Record) setDevice(st sched.Stats) {
	r.Overlap = ptr(st.Overlap())
	r.H2DS, r.KernelsS, r.D2HS = ptr(st.H2D.Seconds()), ptr(st.Kernels.Seconds()), ptr(st.D2H.Seconds())
	r.DevWallS = ptr(st.Wall.Seconds())
	r.Bottleneck = st.Bottleneck()
	r.OpsS = nil
	for _, o := range st.Ops {
		r.OpsS = append(r.OpsS, OpTime{Op: o.Op, S: o.Total.Seconds()})
	}
}

// setLimit fills the copy-limit fields from the measured page-locked bandwidth.
func (r *Record) setLimit(bw *Bandwidth) {
	if bw == nil || bw.H2D <= 0 {
		return
	}
	limit := copyLimitMPix(*bw)
	r.CopyLimit = ptr(limit)
	r.Fraction = ptr(r.MpixPerS / limit)
	r.H2DGBs, r.D2HGBs = ptr(bw.H2D/1e9), ptr(bw.D2H/1e9)
}

// copyLimitMPix is the H2D-bound throughput in MP/s: every input pixel costs 3 bytes of H2D.
func copyLimitMPix(bw Bandwidth) float64 { return bw.H2D / 3 / 1e6 }

// median is the median of d (the mean of the middle two for an even count), 0 for none.
func median(d []time.Duration) time.Duration {
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

// medianIndex is the index of the run whose time is the (lower) median.
func medianIndex(runs []time.Duration) int {
	idx := make([]int, len(runs))
	for i := range idx {
		idx[i] = i
	}
	for i := 1; i < len(idx); i++ { // insertion sort: a handful of runs
		for j := i; j > 0 && runs[idx[j]] < runs[idx[j-1]]; j-- {
			idx[j], idx[j-1] = idx[j-1], idx[j]
		}
	}
	return idx[(len(idx)-1)/2]
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
