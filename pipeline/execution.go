package pipeline

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/imgpipe/imgpipe/cudastage/sched"
)

// Execution holds how a job runs, as opposed to what it computes. The YAML job's
// `execution:` mapping and the CLI flags of the same names set it; both go through Set (or
// SetText), so they accept and refuse the same values.
type Execution struct {
	// Device is "auto", "cpu" or "cuda".
	Device string
	// GPU is the GPUs that auto and cuda open (as CUDA numbers them, after
	// CUDA_VISIBLE_DEVICES). Whether they exist is known only when the driver is asked.
	GPU GPUSet
	// Streams is the number of CUDA streams (GPU only).
	Streams int
	// Batch is the number of images per GPU batch (GPU only).
	Batch int
	// PinnedMB is the page-locked host memory budget of the GPU slots in MiB (GPU only);
	// 0 sizes each slot for Batch 1080p RGB frames.
	PinnedMB int
	// GPUWait makes a GPU run wait for its GPUs to open instead of running its first
	// inputs on the CPU meanwhile (gpu.Options.Wait).
	GPUWait bool
	// MaxMemoryMB is Options.MemoryBudget in MiB; 0 means DefaultMemoryBudget.
	MaxMemoryMB int
	// Workers is the number of images processed at once; 0 means GOMAXPROCS.
	Workers int
	// OnError is "skip" (go on after a failed input, exit 1 at the end) or "fail" (stop at
	// the first failed input).
	OnError string
	// Resume skips inputs that a previous report lists as ok and whose output exists.
	Resume bool
	// Trace is a file to write a Chrome trace-event timeline to; "" for none.
	Trace string
	// Shard is "I/N" to process only the inputs of shard I out of N (see Shard and
	// ParseShard); "" for all.
	Shard string
}

// GPUSet is the gpu setting, the GPUs a run spreads over (gpu.Options.Devices), as
// ParseGPUSet writes it: "all" for every GPU of the host, or distinct ordinals in the
// order given, comma-separated ("0,2,3"). A string, so that an Execution compares with ==.
type GPUSet string

// AllGPUs is the setting for every GPU the driver sees.
const AllGPUs GPUSet = "all"

// ParseGPUSet checks the gpu setting: "all", an ordinal ("2") or a comma-separated list
// of distinct ordinals ("0, 2, 3"), each up to MaxGPUOrdinal. It returns it as written
// without spaces.
func ParseGPUSet(s string) (GPUSet, error) {
	if strings.TrimSpace(s) == string(AllGPUs) {
		return AllGPUs, nil
	}
	var ordinals []int
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		n, err := strconv.Atoi(f)
		switch {
		case err != nil:
			return "", fmt.Errorf("gpu=%s: %q is not a GPU ordinal (want all, an ordinal from 0, or a list such as 0,2,3)", s, f)
		case n < 0 || n > MaxGPUOrdinal:
			return "", fmt.Errorf("gpu=%s: ordinal %d out of range (0..%d)", s, n, MaxGPUOrdinal)
		case slices.Contains(ordinals, n):
			return "", fmt.Errorf("gpu=%s: GPU %d named twice", s, n)
		}
		ordinals = append(ordinals, n)
	}
	return GPUSet(strings.ReplaceAll(s, " ", "")), nil
}

// Ordinals are the GPUs of a set that names them; nil for AllGPUs.
func (g GPUSet) Ordinals() []int {
	if g == AllGPUs {
		return nil
	}
	var ordinals []int
	for _, f := range strings.Split(string(g), ",") {
		n, _ := strconv.Atoi(f) // ParseGPUSet checked it
		ordinals = append(ordinals, n)
	}
	return ordinals
}

// MaxGPUOrdinal bounds the gpu setting. It is far above the GPUs any one host has; the
// bound only keeps nonsense out early, and the real check is against the driver's count
// when the GPU is opened.
const MaxGPUOrdinal = 1023

// Defaults of a GPU run, chosen by measurement: two streams were as fast as more, and
// batches of 8 to 32 alike (bench/results/2026-12-07-code-comments.md#pipeline). Two
// streams already overlap one batch's copies with another's kernels (the executor orders
// each engine's work across streams), so more only cost memory. DefaultStreams is the streams setting's default; DefaultBatch is what the batch
// setting's 0 means, unless the GPU decodes the files: then batches are as large as the
// decoder's calls (sched.DecoderInfo.DecoderBatch), since nvJPEG's hardware engines
// decode larger calls faster (see package pipeline/gpu).
const (
	DefaultStreams = 2
	DefaultBatch   = 16
)

// executionSettings defines every Execution field once: its name, type, default, range and
// help. It is the only place that holds them: the YAML job's execution mapping, the CLI's
// flags and their --help, imgpipe bench's flags and package pipeline/gpu's checks all derive from it.
// The upper bounds of streams, batch and pinned_mb are the executor's limits.
var executionSettings = []ParamSpec{
	{Name: "device", Kind: Enum, Default: "auto", Values: []string{"auto", "cpu", "cuda"},
		Help: "where pixel stages run: auto uses a working GPU when the run is long enough to repay starting it, else the CPU; gpu means cuda"},
	{Name: "gpu", Kind: String, Default: "0",
		Help: "which GPUs auto and cuda use: an ordinal counting from 0, a list (0,2,3) or all; a run over several spreads its batches over them (see 'imgpipe devices')"},
	{Name: "streams", Kind: Int, Default: int64(DefaultStreams), Range: &Range{Min: 1, Max: sched.MaxStreams},
		Help: "CUDA streams (GPU only)"},
	{Name: "batch", Kind: Int, Default: int64(0), Range: &Range{Min: 0, Max: sched.MaxBatch},
		Help: fmt.Sprintf("images per GPU batch (GPU only); 0: %d, or 56 when the GPU decodes the files (turbo-cuda's calls, and 8 per nvJPEG engine on an H100 or H200)", DefaultBatch)},
	{Name: "pinned_mb", Kind: Int, Default: int64(0), Range: &Range{Min: 0, Max: sched.MaxSlotBytes >> 20},
		Help: "page-locked memory for the GPU's batch slots, in MiB (GPU only); 0 sizes each slot for batch 1080p frames"},
	{Name: "gpu_wait", Kind: Bool, Default: false,
		Help: "wait for the GPU to open (a few tenths of a second) before the first input, instead of running the first inputs wholly on the CPU meanwhile (the same bits)"},
	{Name: "max_memory_mb", Kind: Int, Default: int64(0), Range: &Range{Min: 0, Max: 1 << 24},
		Help: fmt.Sprintf("memory the images being decoded and processed at once may take together, in MiB "+
			"(each: its file, the decoder's working set and the chain's buffers, charged from its header before it is read; "+
			"also sets Go's memory limit); 0 means %d", DefaultMemoryBudget>>20)},
	{Name: "workers", Kind: Int, Default: int64(0), Range: &Range{Min: 0, Max: 4096},
		Help: "images processed at once on the CPU (on a GPU: decode workers, and as many save workers); 0 means one per core"},
	{Name: "on_error", Kind: Enum, Default: "skip", Values: []string{"skip", "fail"},
		Help: "skip: report a failed input and go on (exit 1); fail: stop at the first failure"},
	{Name: "resume", Kind: Bool, Default: false,
		Help: "skip inputs the previous report lists as ok whose output exists"},
	{Name: "trace", Kind: String, Default: "",
		Help: "write a Chrome trace-event timeline (JSON) to this file"},
	{Name: "shard", Kind: String, Default: "",
		Help: "I/N: process only the inputs whose relative path hashes to shard I of N (FNV-1a 64 mod N)"},
}

// ExecutionSettings returns the definitions of the execution settings, in table order, for
// help texts and flags.
func ExecutionSettings() []ParamSpec {
	return append([]ParamSpec(nil), executionSettings...)
}

// ExecutionSetting returns the definition of the setting called name (as written in YAML:
// "on_error").
func ExecutionSetting(name string) (ParamSpec, error) {
	ps, err := executionSetting(name)
	if err != nil {
		return ParamSpec{}, err
	}
	return *ps, nil
}

// CheckSetting reports whether v (a string, int or bool) is a valid value of the setting
// called name, with the message Set gives. It is the one range check of the execution
// settings: Set, SetText, package pipeline/gpu and imgpipe bench's lists all go through it.
func CheckSetting(name string, v any) error {
	ps, err := executionSetting(name)
	if err == nil {
		_, err = ps.convert(v)
	}
	return err
}

// SettingUsage is the help line of a setting on a command line: its help with its range or
// its values appended, e.g. "CUDA streams (GPU only) (1..64)". (The flag package appends the
// default.)
func SettingUsage(ps ParamSpec) string {
	if r := ps.Range; r != nil {
		return fmt.Sprintf("%s (%d..%d)", ps.Help, int64(r.Min), int64(r.Max))
	} else if ps.Kind == Enum {
		return ps.Help + " (" + strings.Join(ps.Values, "|") + ")"
	}
	return ps.Help
}

// RunOptions returns the options of a CPU run that the settings give: workers, memory
// budget and on_error. Device, resume and trace are the caller's to act on: they open
// things (package pipeline/gpu's RunOptions adds the GPUs' settings).
func (e Execution) RunOptions() Options {
	return Options{Workers: e.Workers, MemoryBudget: int64(e.MaxMemoryMB) << 20, StopOnError: e.OnError == "fail"}
}

// DefaultExecution returns the settings used when neither a job nor a flag sets them.
func DefaultExecution() Execution {
	var e Execution
	for i := range executionSettings {
		ps := &executionSettings[i]
		if err := e.assign(ps.Name, ps.Default); err != nil {
			panic("pipeline: execution defaults: " + err.Error())
		}
	}
	return e
}

func executionSetting(name string) (*ParamSpec, error) {
	for i := range executionSettings {
		if executionSettings[i].Name == name {
			return &executionSettings[i], nil
		}
	}
	names := make([]string, len(executionSettings))
	for i, ps := range executionSettings {
		names[i] = ps.Name
	}
	msg := fmt.Sprintf("unknown execution setting %q", name)
	if near := Nearest(name, names); near != "" {
		msg += fmt.Sprintf(" (did you mean %q?)", near)
	} else {
		msg += " (settings: " + strings.Join(names, ", ") + ")"
	}
	return nil, fmt.Errorf("%s", msg)
}

// Set validates a Go value (string, int or bool) for the setting called name (as written
// in YAML: "on_error") and stores it.
func (e *Execution) Set(name string, v any) error {
	ps, err := executionSetting(name)
	if err != nil {
		return err
	}
	val, err := ps.convert(v)
	if err != nil {
		return err
	}
	return e.assign(name, val)
}

// SetText is Set for a value written as text, such as a YAML scalar ("4", "true", "fail"):
// it parses the text as the setting's type, validates it and stores it.
func (e *Execution) SetText(name, s string) error {
	if name == "device" && s == "gpu" {
		s = "cuda" // what users type for the GPU; cuda is the value's one name
	}
	ps, err := executionSetting(name)
	if err != nil {
		return err
	}
	val, err := ps.parse(s)
	if err != nil {
		return err
	}
	return e.assign(name, val)
}

// Text returns the setting called name as SetText reads it back ("4", "true", "0,2"), so
// that settings can be written into a job file; "" for a name that is no setting.
func (e Execution) Text(name string) string {
	switch name {
	case "device":
		return e.Device
	case "gpu":
		return string(e.GPU)
	case "streams":
		return strconv.Itoa(e.Streams)
	case "batch":
		return strconv.Itoa(e.Batch)
	case "pinned_mb":
		return strconv.Itoa(e.PinnedMB)
	case "gpu_wait":
		return strconv.FormatBool(e.GPUWait)
	case "max_memory_mb":
		return strconv.Itoa(e.MaxMemoryMB)
	case "workers":
		return strconv.Itoa(e.Workers)
	case "on_error":
		return e.OnError
	case "resume":
		return strconv.FormatBool(e.Resume)
	case "trace":
		return e.Trace
	case "shard":
		return e.Shard
	}
	return ""
}

func (e *Execution) assign(name string, v any) error {
	switch name {
	case "device":
		e.Device = v.(string)
	case "gpu":
		g, err := ParseGPUSet(v.(string))
		if err != nil {
			return err
		}
		e.GPU = g
	case "streams":
		e.Streams = int(v.(int64))
	case "batch":
		e.Batch = int(v.(int64))
	case "pinned_mb":
		e.PinnedMB = int(v.(int64))
	case "gpu_wait":
		e.GPUWait = v.(bool)
	case "max_memory_mb":
		e.MaxMemoryMB = int(v.(int64))
	case "workers":
		e.Workers = int(v.(int64))
	case "on_error":
		e.OnError = v.(string)
	case "resume":
		e.Resume = v.(bool)
	case "trace":
		e.Trace = v.(string)
	case "shard":
		if s := v.(string); s != "" {
			if _, _, err := ParseShard(s); err != nil {
				return err
			}
		}
		e.Shard = v.(string)
	default:
		return fmt.Errorf("execution setting %s has no field", name)
	}
	return nil
}
