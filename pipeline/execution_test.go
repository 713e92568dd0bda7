package pipeline

import (
	"fmt"
	"strings"
	"testing"

	"github.com/imgpipe/imgpipe/cudastage/sched"
)

// The gpu setting takes an ordinal, a list of distinct ordinals or all, and refuses the
// rest saying why, leaving the field alone.
func TestExecutionGPU(t *testing.T) {
	if e := DefaultExecution(); e.GPU != "0" {
		t.Errorf("default gpu = %v, want 0", e.GPU)
	}
	tests := []struct {
		name string
		v    string
		want string // the setting stored (String) when err is ""
		err  string // a fragment of the error
	}{
		{"zero", "0", "0", ""},
		{"second GPU", "1", "1", ""},
		{"highest", fmt.Sprint(MaxGPUOrdinal), fmt.Sprint(MaxGPUOrdinal), ""},
		{"list", "0,2,3", "0,2,3", ""},
		{"list in its order, spaced", "3, 1", "3,1", ""},
		{"all", "all", "all", ""},
		{"negative", "-1", "", "gpu=-1: ordinal -1 out of range (0..1023)"},
		{"too high", fmt.Sprint(MaxGPUOrdinal + 1), "", "ordinal 1024 out of range"},
		{"duplicate", "0,1,0", "", "gpu=0,1,0: GPU 0 named twice"},
		{"word", "first", "", `"first" is not a GPU ordinal (want all, an ordinal from 0, or a list such as 0,2,3)`},
		{"all in a list", "0,all", "", `"all" is not a GPU ordinal`},
		{"empty item", "0,", "", `"" is not a GPU ordinal`},
		{"fraction", "1.5", "", `"1.5" is not a GPU ordinal`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := DefaultExecution()
			e.GPU = "99" // a failed Set must leave the field alone
			err := e.SetText("gpu", tt.v)
			switch {
			case tt.err == "" && (err != nil || string(e.GPU) != tt.want):
				t.Errorf("SetText(gpu, %s) = %v, GPU %v; want GPU %s", tt.v, err, e.GPU, tt.want)
			case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
				t.Errorf("SetText(gpu, %s) = %v, want an error containing %q", tt.v, err, tt.err)
			case tt.err != "" && e.GPU != "99":
				t.Errorf("SetText(gpu, %s) failed but changed GPU to %v", tt.v, e.GPU)
			}
		})
	}
	if e := DefaultExecution(); e.Set("gpu", 1) == nil {
		t.Error("Set(gpu, 1): an int accepted, want the setting's text")
	}
}

func TestExecutionSet(t *testing.T) {
	e := DefaultExecution()
	if e.Device != "auto" || e.OnError != "skip" || e.Workers != 0 || e.Streams < 1 || e.Batch != 0 {
		t.Errorf("defaults: %+v", e)
	}
	if err := e.Set("workers", 4); err != nil || e.Workers != 4 {
		t.Errorf("Set workers: %v %+v", err, e)
	}
	if err := e.Set("on_error", "fail"); err != nil || e.OnError != "fail" {
		t.Errorf("Set on_error: %v", err)
	}
	for _, bad := range []struct {
		name string
		v    any
		want string
	}{
		{"streams", 65, "out of range"},
		{"device", "tpu", "want one of"},
		{"resume", "yes", "want a bool"},
		{"worker", 1, `did you mean "workers"`},
	} {
		if err := e.Set(bad.name, bad.v); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("Set(%s, %v) = %v, want %q", bad.name, bad.v, err, bad.want)
		}
	}
}

func TestExecutionSetText(t *testing.T) {
	tests := []struct {
		name, text string
		err        string // a fragment of the error; "" for none
	}{
		{"workers", "4", ""},
		{"resume", "true", ""},
		{"on_error", "fail", ""},
		{"streams", "0", "streams=0 is out of range [1, 64]"},
		{"batch", "many", "batch=many: want an integer"},
		{"resume", "yes", "resume=yes: want true or false"},
		{"worker", "1", `did you mean "workers"`},
	}
	for _, tt := range tests {
		e := DefaultExecution()
		err := e.SetText(tt.name, tt.text)
		switch {
		case tt.err == "" && err != nil:
			t.Errorf("SetText(%s, %s) = %v", tt.name, tt.text, err)
		case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
			t.Errorf("SetText(%s, %s) = %v, want %q", tt.name, tt.text, err, tt.err)
		}
	}
	e := DefaultExecution()
	if err := e.SetText("workers", "4"); err != nil || e.Workers != 4 {
		t.Errorf("SetText(workers, 4): %v, workers %d", err, e.Workers)
	}
	if err := e.SetText("on_error", "fail"); err != nil || e.OnError != "fail" {
		t.Errorf("SetText(on_error, fail): %v, on_error %s", err, e.OnError)
	}
	if err := e.SetText("device", "gpu"); err != nil || e.Device != "cuda" {
		t.Errorf("SetText(device, gpu): %v, device %s; want cuda", err, e.Device)
	}
	if err := e.SetText("device", "GPU"); err == nil {
		t.Errorf("SetText(device, GPU): no error; values are exact, as cuda's and cpu's are")
	}
}

// The settings table owns every default, range and help line: each entry is consistent,
// its bounds are exactly what CheckSetting accepts, and the measured defaults and the
// executor's limits are the ones it holds.
func TestExecutionSettingsTable(t *testing.T) {
	e := DefaultExecution()
	if e.Streams != DefaultStreams || e.Batch != 0 || DefaultStreams != 2 || DefaultBatch != 16 {
		t.Errorf("defaults: streams %d batch %d (DefaultStreams %d, DefaultBatch %d)", e.Streams, e.Batch, DefaultStreams, DefaultBatch)
	}
	for _, ps := range ExecutionSettings() {
		if err := ps.check(); err != nil {
			t.Errorf("%s: %v", ps.Name, err)
		}
		if got, err := ExecutionSetting(ps.Name); err != nil || got.Name != ps.Name {
			t.Errorf("ExecutionSetting(%s) = %v, %v", ps.Name, got.Name, err)
		}
		if r := ps.Range; r != nil {
			lo, hi := int(r.Min), int(r.Max)
			for n, ok := range map[int]bool{lo - 1: false, lo: true, hi: true, hi + 1: false} {
				if err := CheckSetting(ps.Name, n); (err == nil) != ok {
					t.Errorf("CheckSetting(%s, %d) = %v", ps.Name, n, err)
				}
			}
			if want := fmt.Sprintf("%s (%d..%d)", ps.Help, lo, hi); SettingUsage(ps) != want {
				t.Errorf("SettingUsage(%s) = %q, want %q", ps.Name, SettingUsage(ps), want)
			}
		}
	}
	if settingMax(t, "streams") != sched.MaxStreams || settingMax(t, "batch") != sched.MaxBatch || settingMax(t, "pinned_mb") != sched.MaxSlotBytes>>20 {
		t.Errorf("the table's bounds are not the executor's limits")
	}
	device, _ := ExecutionSetting("device")
	streams, _ := ExecutionSetting("streams")
	resume, _ := ExecutionSetting("resume")
	for ps, want := range map[*ParamSpec]string{
		&device:  "where pixel stages run: auto uses a working GPU when the run is long enough to repay starting it, else the CPU; gpu means cuda (auto|cpu|cuda)",
		&streams: "CUDA streams (GPU only) (1..64)",
		&resume:  resume.Help,
	} {
		if got := SettingUsage(*ps); got != want {
			t.Errorf("SettingUsage(%s) = %q, want %q", ps.Name, got, want)
		}
	}
	if _, err := ExecutionSetting("stream"); err == nil || !strings.Contains(err.Error(), `did you mean "streams"`) {
		t.Errorf("ExecutionSetting(stream) = %v", err)
	}
}

// settingMax is the upper bound of the Int setting called name.
func settingMax(t *testing.T, name string) int64 {
	t.Helper()
	ps, err := ExecutionSetting(name)
	if err != nil || ps.Range == nil {
		t.Fatalf("no range for execution setting %s: %v", name, err)
	}
	return int64(ps.Range.Max)
}

// TestExecutionText: every setting's Text reads back through SetText to the same value,
// for the defaults and for a value of each set away from its default.
func TestExecutionText(t *testing.T) {
	changed := map[string]string{"device": "cuda", "gpu": "0,2,3", "streams": "5", "batch": "8", "pinned_mb": "64",
		"gpu_wait": "true", "max_memory_mb": "512", "workers": "3", "on_error": "fail", "resume": "true", "trace": "t.json", "shard": "2/8"}
	for _, ps := range ExecutionSettings() {
		for _, start := range []string{"", changed[ps.Name]} {
			e := DefaultExecution()
			if start != "" {
				if err := e.SetText(ps.Name, start); err != nil {
					t.Fatalf("%s=%s: %v", ps.Name, start, err)
				}
			}
			back := DefaultExecution()
			if err := back.SetText(ps.Name, e.Text(ps.Name)); err != nil || back != e {
				t.Errorf("%s: Text %q reads back as %+v (%v), want %+v", ps.Name, e.Text(ps.Name), back, err, e)
			}
		}
		if changed[ps.Name] == "" {
			t.Errorf("%s: no changed value in this test", ps.Name)
		}
	}
	if got := DefaultExecution().Text("nope"); got != "" {
		t.Errorf("Text(nope) = %q", got)
	}
}

func ExampleExecution_Text() {
	e := DefaultExecution()
	if err := e.SetText("gpu", "0, 2"); err != nil {
		panic(err)
	}
	fmt.Println(e.Text("gpu"), e.Text("streams"), e.Text("resume"))
	// Output: 0,2 2 false
}
