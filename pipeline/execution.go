package pipeline

import (
	"fmt"
	"strings"

	"github.com/imgpipe/imgpipe/cudastage/sched"
)

// Execution holds how a job runs, as opposed to what it computes. The YAML job's
// `execution:` mapping and the CLI flags of the same names set it; both go through Set (or
// SetText), so they accept and refuse the same values.
type Execution struct {
	// Device is "auto", "cpu" or "cuda".
	Device string
	// GPU is the ordinal of the GPU that auto and cuda open (as CUDA numbers them, after
	// CUDA_VISIBLE_DEVICES). Whether it exists is known only when the driver is asked.
	GPU int
	// Streams is the number of CUDA streams (GPU only).
	Streams int
	// Batch is the number of images per GPU batch (GPU only).
	Batch int
	// PinnedMB is the page-locked host memory budget of the GPU slots in MiB (GPU only);
	// 0 sizes each slot for Batch 1080p RGB frames.
	PinnedMB int
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
}

// MaxGPUOrdinal bounds the gpu setting. It is far above the GPUs any one host has; the
// bound only keeps nonsense out early, and the real check is against the driver's count
// when the GPU is opened.
const MaxGPUOrdinal = 1023

// executionSettings defines every Execution field once: its name, type, default, range and
// help. The defaults for streams and batch are DefaultStreams and DefaultBatch, chosen by
// measurement (see there).
var executionSettings = []ParamSpec{
	{Name: "device", Kind: Enum, Default: "auto", Values: []string{"auto", "cpu", "cuda"},
		Help: "where pixel stages run: auto uses a working GPU, else the CPU"},
	{Name: "gpu", Kind: Int, Default: int64(0), Range: &Range{Min: 0, Max: MaxGPUOrdinal},
		Help: "which GPU auto and cuda use, counting from 0 (see 'imgpipe devices')"},
	{Name: "streams", Kind: Int, Default: int64(DefaultStreams), Range: &Range{Min: 1, Max: sched.MaxStreams},
		Help: "CUDA streams (GPU only)"},
	{Name: "batch", Kind: Int, Default: int64(DefaultBatch), Range: &Range{Min: 1, Max: sched.MaxBatch},
		Help: "images per GPU batch (GPU only)"},
	{Name: "pinned_mb", Kind: Int, Default: int64(0), Range: &Range{Min: 0, Max: sched.MaxSlotBytes >> 20},
		Help: "page-locked memory budget of the GPU slots in MiB (GPU only); 0 sizes slots for batch 1080p frames"},
	{Name: "max_memory_mb", Kind: Int, Default: int64(0), Range: &Range{Min: 0, Max: 1 << 24},
		Help: "memory the images being decoded and processed at once may take together, in MiB (16 bytes per pixel each); 0 means 4096"},
	{Name: "workers", Kind: Int, Default: int64(0), Range: &Range{Min: 0, Max: 4096},
		Help: "images processed at once on the CPU (on a GPU: decode workers, and as many save workers); 0 means one per core (GOMAXPROCS)"},
	{Name: "on_error", Kind: Enum, Default: "skip", Values: []string{"skip", "fail"},
		Help: "skip: report a failed input and go on; fail: stop at the first failure"},
	{Name: "resume", Kind: Bool, Default: false,
		Help: "skip inputs the previous report lists as ok whose output exists"},
	{Name: "trace", Kind: String, Default: "",
		Help: "write a Chrome trace-event timeline to this file"},
}

// ExecutionSettings returns the definitions of the execution settings, for help texts.
func ExecutionSettings() []ParamSpec {
	return append([]ParamSpec(nil), executionSettings...)
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

func (e *Execution) assign(name string, v any) error {
	switch name {
	case "device":
		e.Device = v.(string)
	case "gpu":
		e.GPU = int(v.(int64))
	case "streams":
		e.Streams = int(v.(int64))
	case "batch":
		e.Batch = int(v.(int64))
	case "pinned_mb":
		e.PinnedMB = int(v.(int64))
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
	default:
		return fmt.Errorf("execution setting %s has no field", name)
	}
	return nil
}
