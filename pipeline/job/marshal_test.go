package job

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/imgpipe/imgpipe/pipeline"
)

// TestMarshal: a job read from YAML, with settings changed, reads back from Marshal's
// bytes to the same fields; defaults are left out.
func TestMarshal(t *testing.T) {
	for _, tc := range []struct {
		name, yaml string
		exec       map[string]string
		want       string // a part of the marshalled job
	}{
		{"bare", "input: {dir: in}\npipeline: [decode, save]\noutput: {dir: out}\n", nil,
			`{"input":{"dir":"in"},"pipeline":"decode | save","output":{"dir":"out"}}`},
		{"report, list stages", "input: {dir: /a b/in}\npipeline:\n  - decode\n  - blur: {sigma: 1.5}\n  - histogram\noutput: {report: /r.jsonl}\n", nil,
			`"pipeline":"decode | blur sigma=1.5 | histogram","output":{"report":"/r.jsonl"}`},
		{"settings", "input: {dir: in}\npipeline: decode | resize width=256 height=256 fit=inside | save format=jpeg quality=75\noutput: {dir: out}\nexecution: {gpu: [0, 2], workers: 3}\n",
			map[string]string{"resume": "true", "on_error": "fail", "shard": "1/4"},
			`"execution":{"gpu":"0,2","on_error":"fail","resume":"true","shard":"1/4","workers":"3"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j, err := Parse("job.yaml", []byte(tc.yaml))
			if err != nil {
				t.Fatal(err)
			}
			for k, v := range tc.exec {
				if err := j.Exec.SetText(k, v); err != nil {
					t.Fatal(err)
				}
			}
			b := j.Marshal()
			if !strings.Contains(string(b), tc.want) {
				t.Errorf("Marshal = %s, want it to hold %s", b, tc.want)
			}
			back, err := Parse("sent.json", b)
			if err != nil {
				t.Fatalf("%s: %v", b, err)
			}
			if back.InputDir != j.InputDir || back.OutputDir != j.OutputDir || back.Report != j.Report || back.Exec != j.Exec ||
				pipeline.FormatSpec(back.Steps) != pipeline.FormatSpec(j.Steps) {
				t.Errorf("read back as %+v, want %+v", back, j)
			}
		})
	}
}

// TestAbs: local paths become absolute against the working directory; URLs and unset
// paths stay.
func TestAbs(t *testing.T) {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	j := &Job{InputDir: "in", OutputDir: "s3://b/out?region=x", Report: "/abs/r.jsonl", Exec: pipeline.DefaultExecution()}
	j.Exec.Trace = "../t.json"
	if err := j.Abs(); err != nil {
		t.Fatal(err)
	}
	want := Job{InputDir: filepath.Join(wd, "in"), OutputDir: "s3://b/out?region=x", Report: "/abs/r.jsonl", Exec: j.Exec}
	want.Exec.Trace = filepath.Join(filepath.Dir(wd), "t.json")
	if j.InputDir != want.InputDir || j.OutputDir != want.OutputDir || j.Report != want.Report || j.Exec.Trace != want.Exec.Trace {
		t.Errorf("Abs: %+v, want %+v", j, want)
	}
	empty := &Job{}
	if err := empty.Abs(); err != nil || empty.InputDir != "" || empty.Report != "" {
		t.Errorf("Abs of an empty job: %+v, %v", empty, err)
	}
}
