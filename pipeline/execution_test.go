package pipeline

import (
	"strings"
	"testing"
)

func TestExecutionGPU(t *testing.T) {
	if e := DefaultExecution(); e.GPU != 0 {
		t.Errorf("default gpu = %d, want 0", e.GPU)
	}
	tests := []struct {
		name string
		v    any
		want int    // the ordinal stored when err is ""
		err  string // a fragment of the error
	}{
		{"zero", 0, 0, ""},
		{"second GPU", 1, 1, ""},
		{"int64", int64(7), 7, ""},
		{"whole float", 3.0, 3, ""},
		{"highest", MaxGPUOrdinal, MaxGPUOrdinal, ""},
		{"negative", -1, 0, "gpu=-1 is out of range [0, 1023]"},
		{"too high", MaxGPUOrdinal + 1, 0, "gpu=1024 is out of range [0, 1023]"},
		{"fraction", 1.5, 0, "gpu=1.5: want an integer"},
		{"text", "1", 0, "gpu"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := DefaultExecution()
			e.GPU = -99 // a failed Set must leave the field alone
			err := e.Set("gpu", tt.v)
			switch {
			case tt.err == "" && (err != nil || e.GPU != tt.want):
				t.Errorf("Set(gpu, %v) = %v, GPU %d; want GPU %d", tt.v, err, e.GPU, tt.want)
			case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
				t.Errorf("Set(gpu, %v) = %v, want an error containing %q", tt.v, err, tt.err)
			case tt.err != "" && e.GPU != -99:
				t.Errorf("Set(gpu, %v) failed but changed GPU to %d", tt.v, e.GPU)
			}
		})
	}
}

func TestExecutionSet(t *testing.T) {
	e := DefaultExecution()
	if e.Device != "auto" || e.OnError != "skip" || e.Workers != 0 || e.Streams < 1 || e.Batch < 1 {
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
}
