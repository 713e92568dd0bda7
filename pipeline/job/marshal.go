package job

import (
	"encoding/json"
	"path/filepath"
	"strings"

	"github.com/imgpipe/imgpipe/pipeline"
)

// Marshal writes the job as a job file that Parse reads back to the same folders, report,
// chain and settings: JSON, which the YAML schema reads as it is, with the chain as one
// spec and only the settings that differ from pipeline.DefaultExecution. It is what a
// client sends a server for the job it built from flags and a file (POST /v1/jobs).
func (j *Job) Marshal() []byte {
	type output struct {
		Dir    string `json:"dir,omitempty"`
		Report string `json:"report,omitempty"`
	}
	doc := struct {
		Input     map[string]string `json:"input,omitempty"`
		Pipeline  string            `json:"pipeline,omitempty"`
		Output    *output           `json:"output,omitempty"`
		Execution map[string]string `json:"execution,omitempty"`
	}{Pipeline: pipeline.FormatSpec(j.Steps)}
	if j.InputDir != "" {
		doc.Input = map[string]string{"dir": j.InputDir}
	}
	if j.OutputDir != "" || j.Report != "" {
		doc.Output = &output{j.OutputDir, j.Report}
	}
	def := pipeline.DefaultExecution()
	for _, ps := range pipeline.ExecutionSettings() {
		if v := j.Exec.Text(ps.Name); v != def.Text(ps.Name) {
			if doc.Execution == nil {
				doc.Execution = map[string]string{}
			}
			doc.Execution[ps.Name] = v
		}
	}
	b, err := json.Marshal(doc)
	if err != nil {
		panic("job: marshal: " + err.Error()) // strings and maps of strings always marshal
	}
	return b
}

// Abs makes the job's local paths (input, output, report, trace) absolute against the
// working directory, for a job that runs in another process (a server) whose working
// directory is not this one's; bucket URLs stay as they are.
func (j *Job) Abs() error {
	for _, p := range []*string{&j.InputDir, &j.OutputDir, &j.Report, &j.Exec.Trace} {
		if *p == "" || strings.Contains(*p, "://") {
			continue
		}
		abs, err := filepath.Abs(*p)
		if err != nil {
			return err
		}
		*p = abs
	}
	return nil
}
